// Command nfdcheck reads vmmprobe's label files as node-feature-discovery does and checks
// every label by NFD's own rules: each file named on the command line is copied into NFD's
// features.d (as nfd-worker reads it: /etc/kubernetes/node-feature-discovery/features.d,
// so this runs as root, in CI), parsed by NFD's local feature source, and each label it
// yields is validated by nfd-master's rule (validate.Label). It fails when the source drops
// a line of the file (an expired file, a malformed line) or a label breaks a rule. It is a
// module of its own so that NFD's dependencies stay out of cuvmm's go.mod.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/node-feature-discovery/pkg/apis/nfd/validate"
	"sigs.k8s.io/node-feature-discovery/source"
	_ "sigs.k8s.io/node-feature-discovery/source/local"
)

const featuresDir = "/etc/kubernetes/node-feature-discovery/features.d"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nfdcheck LABELFILE...")
		os.Exit(2)
	}
	failed := false
	for _, f := range os.Args[1:] {
		if err := check(f); err != nil {
			fmt.Fprintf(os.Stderr, "nfdcheck: %s: %v\n", f, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func check(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(featuresDir, 0o755); err != nil {
		return err
	}
	ents, _ := os.ReadDir(featuresDir)
	if len(ents) > 0 {
		return fmt.Errorf("%s is not empty: nfdcheck reads every file there", featuresDir)
	}
	dst := filepath.Join(featuresDir, "cuvmm")
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		return err
	}
	defer os.Remove(dst)
	src := source.GetFeatureSource("local")
	if err := src.Discover(); err != nil {
		return err
	}
	labels, err := source.GetLabelSource("local").GetLabels()
	if err != nil {
		return err
	}
	want := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		want[k] = v
	}
	if len(want) == 0 {
		return fmt.Errorf("no labels in the file")
	}
	var errs []string
	for k, v := range want {
		got, ok := labels[k]
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("%s: dropped by NFD's parser", k))
		case fmt.Sprint(got) != v:
			errs = append(errs, fmt.Sprintf("%s: NFD read %q, the file says %q", k, got, v))
		}
		if err := validate.Label(k, v); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%s: %v", k, v, err))
		}
	}
	if len(labels) != len(want) {
		errs = append(errs, fmt.Sprintf("NFD read %d labels, the file has %d", len(labels), len(want)))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	fmt.Printf("nfdcheck: %s: %d labels read and valid\n", file, len(want))
	return nil
}
