package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// barGroup is one panel of horizontal bars: a group's labels and values, in CSV order.
type barGroup struct {
	name   string
	labels []string
	values []float64
}

// readBars reads the CSV of -bars: the columns group, label and value (one bar each),
// grouped into panels by group in the order they first appear.
func readBars(r io.Reader) ([]*barGroup, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) < 2 || len(rows[0]) < 3 || rows[0][0] != "group" || rows[0][1] != "label" || rows[0][2] != "value" {
		return nil, errors.New(`want a header "group,label,value" and a row a bar`)
	}
	var groups []*barGroup
	by := map[string]*barGroup{}
	for i, row := range rows[1:] {
		if len(row) < 3 {
			return nil, fmt.Errorf("line %d: %d fields", i+2, len(row))
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(row[2]), 64)
		if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("line %d: value %q: not a finite number at least 0", i+2, row[2])
		}
		g := by[row[0]]
		if g == nil {
			g = &barGroup{name: row[0]}
			by[row[0]] = g
			groups = append(groups, g)
		}
		g.labels, g.values = append(g.labels, row[1]), append(g.values, v)
	}
	return groups, nil
}

// renderBars draws each group as a panel of horizontal bars on one scale (the largest
// value of all; logarithmic when logScale, from a decade below the smallest), the value
// written at the end of each bar, unit after it.
func renderBars(groups []*barGroup, title, subtitle, unit string, logScale bool) []byte {
	const (
		labelW, barW, valueW = 260.0, 360.0, 90.0
		rowH, groupGap       = 22.0, 34.0
	)
	top := 0.0
	for _, g := range groups {
		for _, v := range g.values {
			top = max(top, v)
		}
	}
	if top == 0 {
		top = 1
	}
	length := func(v float64) float64 { return barW * v / top }
	if logScale {
		low := top
		for _, g := range groups {
			for _, v := range g.values {
				if v > 0 {
					low = min(low, v)
				}
			}
		}
		low = math.Pow(10, math.Floor(math.Log10(low))-1)
		length = func(v float64) float64 { return barW * math.Log10(max(v, low)/low) / math.Log10(top/low) }
	}
	h := headerH
	for _, g := range groups {
		h += groupGap + rowH*float64(len(g.labels))
	}
	w := labelW + barW + valueW
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h+10, w, h+10)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", esc(title))
	if subtitle != "" {
		fmt.Fprintf(&b, `<text x="10" y="44" fill="#555">%s</text>`+"\n", esc(subtitle))
	}
	y := headerH
	for gi, g := range groups {
		y += groupGap
		fmt.Fprintf(&b, `<text x="10" y="%.1f" font-weight="bold">%s</text>`+"\n", y-10, esc(g.name))
		for i, l := range g.labels {
			bw := length(g.values[i])
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", labelW-8, y+rowH*0.7, esc(l))
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", labelW, y+3, bw, rowH-6, palette[(gi+i)%len(palette)])
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s %s</text>`+"\n", labelW+bw+6, y+rowH*0.7, fmtTick(g.values[i]), esc(unit))
			y += rowH
		}
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
