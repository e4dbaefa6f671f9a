package main

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

func TestBars(t *testing.T) {
	in := "group,label,value\na,x,50\na,y,25\nb,x,10\n"
	var out, errb bytes.Buffer
	if code := run([]string{"-bars", "GiB/s", "-title", "T"}, &out, &errb); code != 1 {
		t.Fatalf("standard input is empty in a test: want exit 1, got %d", code)
	}
	groups, err := readBars(strings.NewReader(in))
	if err != nil || len(groups) != 2 || len(groups[0].values) != 2 || groups[1].values[0] != 10 {
		t.Fatalf("%v %+v", err, groups)
	}
	svg := renderBars(groups, "T", "S", "GiB/s", false)
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Fatalf("not XML: %v", err)
	}
	for _, want := range []string{`width="360.0"`, `width="180.0"`, `width="72.0"`, "50 GiB/s", "25 GiB/s"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("no %s in %s", want, svg)
		}
	}
	// On a log scale from a decade below the smallest (1): 10 is a third of the way to 1000.
	logGroups, err := readBars(strings.NewReader("group,label,value\na,x,1000\na,y,10\n"))
	if err != nil {
		t.Fatal(err)
	}
	svg = renderBars(logGroups, "T", "", "us", true)
	for _, want := range []string{`width="360.0"`, `width="120.0"`} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("log scale: no %s in %s", want, svg)
		}
	}
	for _, bad := range []string{"", "group,label\n", "group,label,value\na,x,-1\n", "group,label,value\na,x,many\n", "group,label,value\na,x,NaN\n", "group,label,value\na,x,+Inf\n"} {
		if _, err := readBars(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
