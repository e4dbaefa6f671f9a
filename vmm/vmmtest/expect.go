package vmmtest

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
)

// EnvRecord names the file the suite writes observed results to, instead of asserting them.
const EnvRecord = "CUVMM_VMMTEST_RECORD"

//go:embed testdata/expectations.json
var expectationsJSON []byte

// Expectations are results recorded on a real driver: for each case name, the CUresult
// name it returned ("CUDA_SUCCESS" for no error).
type Expectations struct {
	Driver  int               `json:"driver"` // cuDriverGetVersion of the recording
	Device  string            `json:"device"` // device 0's name
	Note    string            `json:"note,omitempty"`
	Results map[string]string `json:"results"` // case name -> CUresult name
}

// Recorded returns the expectations embedded in this package.
func Recorded() (*Expectations, error) {
	var e Expectations
	if err := json.Unmarshal(expectationsJSON, &e); err != nil {
		return nil, fmt.Errorf("vmmtest: testdata/expectations.json: %w", err)
	}
	if e.Results == nil {
		e.Results = map[string]string{}
	}
	return &e, nil
}

// resultName is the CUresult name an error carries: CUDA_SUCCESS for nil, the Result's name
// otherwise, and "GO_ERROR: ..." for errors that carry no driver result.
func resultName(err error) string {
	if err == nil {
		return cu.SUCCESS.Name()
	}
	if r, ok := cu.ResultOf(err); ok {
		return r.Name()
	}
	return "GO_ERROR: " + err.Error()
}

// checker compares or records results.
type checker struct {
	exp    *Expectations
	record bool
	mu     sync.Mutex
	seen   map[string]string
}

func (c *checker) check(t *testing.T, name string, err error) {
	t.Helper()
	c.observe(t, name, resultName(err), err)
}

// observe compares (or records) a fact that is not a result: where a reservation landed
// relative to another, whether a hint was honoured. err, if any, is shown on a mismatch.
func (c *checker) observe(t *testing.T, name, got string, err error) {
	t.Helper()
	c.mu.Lock()
	c.seen[name] = got
	c.mu.Unlock()
	if c.record {
		t.Logf("%s: %s (%v)", name, got, err)
		return
	}
	want, ok := c.exp.Results[name]
	if !ok {
		t.Errorf("%s: no recorded expectation (this backend returned %s: %v)", name, got, err)
		return
	}
	if got != want {
		t.Errorf("%s: got %s, the driver (%d, %s) returned %s; error: %v", name, got, c.exp.Driver, c.exp.Device, want, err)
	}
}

func (c *checker) write(path string, driver int, device string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Expectations{Driver: driver, Device: device, Results: c.seen}
	// Keep earlier results of cases this run skipped (other capabilities, other machines).
	if prev, err := os.ReadFile(path); err == nil {
		var old Expectations
		if json.Unmarshal(prev, &old) == nil {
			for k, v := range old.Results {
				if _, ok := out.Results[k]; !ok {
					out.Results[k] = v
				}
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	keys := make([]string, 0, len(out.Results))
	for k := range out.Results {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
