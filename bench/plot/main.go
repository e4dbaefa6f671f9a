// Command plot draws the growth series that bench/grow writes (-csv) as an SVG (with
// -bars, horizontal bars of a CSV of group,label,value instead, as docs/sleep.svg, on a
// logarithmic scale only with -log on): cumulative
// growth time (ms) against buffer size (GiB), one line per strategy, one panel per run
// (total and step). The time axis is logarithmic when the times span more than two decades
// (-log auto), since the strategies differ by orders of magnitude.
//
//	plot -in growth.csv -o growth.svg [-title T] [-subtitle S] [-log auto|on|off]
//
// The SVG is written by hand: no dependencies.
package main

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "the CSV `file` bench/grow wrote with -csv (default: standard input)")
	out := fs.String("o", "", "the SVG `file` to write (default: standard output)")
	title := fs.String("title", "Growing one device buffer: time against size", "the plot's `title`")
	subtitle := fs.String("subtitle", "", "a second line under the title (`text`), e.g. the machine")
	logMode := fs.String("log", "auto", "logarithmic time axis: `auto` (when the times span more than two decades), on or off")
	bars := fs.String("bars", "", "draw horizontal bars instead, from a CSV of group,label,value, the values in `unit`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "plot: unexpected arguments %q (use -in and -o)\n", fs.Args())
		return 2
	}
	if *logMode != "auto" && *logMode != "on" && *logMode != "off" {
		fmt.Fprintf(stderr, "plot: -log %q: want auto, on or off\n", *logMode)
		return 2
	}
	var r io.Reader = os.Stdin
	name := "standard input"
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			fmt.Fprintf(stderr, "plot: %v\n", err)
			return 1
		}
		defer f.Close()
		r, name = f, *in
	}
	var svg []byte
	if *bars != "" {
		groups, err := readBars(r)
		if err != nil {
			fmt.Fprintf(stderr, "plot: %s: %v\n", name, err)
			return 1
		}
		svg = renderBars(groups, *title, *subtitle, *bars, *logMode == "on")
	} else {
		panels, err := readSeries(r)
		if err != nil {
			fmt.Fprintf(stderr, "plot: %s: %v\n", name, err)
			return 1
		}
		svg = render(panels, *title, *subtitle, *logMode)
	}
	if *out == "" {
		if _, err := stdout.Write(svg); err != nil {
			fmt.Fprintf(stderr, "plot: %v\n", err)
			return 1
		}
		return 0
	}
	if err := os.WriteFile(*out, svg, 0o644); err != nil {
		fmt.Fprintf(stderr, "plot: %v\n", err)
		return 1
	}
	return 0
}

type point struct{ x, y float64 } // GiB, ms

type series struct {
	name   string
	points []point
}

// panel is one run: its series in the order of the CSV.
type panel struct {
	run    string
	series []*series
}

// readSeries reads bench/grow's CSV: the columns run, strategy, size_bytes and elapsed_ns
// (others are ignored), grouped into panels by run and lines by strategy, in the order they
// first appear.
func readSeries(r io.Reader) ([]*panel, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("empty: no header")
	}
	if err != nil {
		return nil, err
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	for _, want := range []string{"run", "strategy", "size_bytes", "elapsed_ns"} {
		if _, ok := col[want]; !ok {
			return nil, fmt.Errorf("no %q column in the header %q (is this bench/grow's -csv output?)", want, header)
		}
	}
	var panels []*panel
	byRun := map[string]*panel{}
	bySeries := map[[2]string]*series{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		field := func(name string) (string, error) {
			i := col[name]
			if i >= len(rec) {
				return "", fmt.Errorf("line %d: no %s field", line, name)
			}
			return strings.TrimSpace(rec[i]), nil
		}
		var vals [4]string
		for i, name := range []string{"run", "strategy", "size_bytes", "elapsed_ns"} {
			if vals[i], err = field(name); err != nil {
				return nil, err
			}
		}
		if vals[0] == "" || vals[1] == "" {
			return nil, fmt.Errorf("line %d: empty run or strategy", line)
		}
		size, err := strconv.ParseUint(vals[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: size_bytes %q: not a byte count", line, vals[2])
		}
		ns, err := strconv.ParseUint(vals[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: elapsed_ns %q: not a duration in nanoseconds", line, vals[3])
		}
		p := byRun[vals[0]]
		if p == nil {
			p = &panel{run: vals[0]}
			byRun[vals[0]] = p
			panels = append(panels, p)
		}
		s := bySeries[[2]string{vals[0], vals[1]}]
		if s == nil {
			s = &series{name: vals[1]}
			bySeries[[2]string{vals[0], vals[1]}] = s
			p.series = append(p.series, s)
		}
		s.points = append(s.points, point{float64(size) / (1 << 30), float64(ns) / 1e6})
	}
	if len(panels) == 0 {
		return nil, errors.New("no data rows")
	}
	for _, p := range panels {
		for _, s := range p.series {
			sort.SliceStable(s.points, func(i, j int) bool { return s.points[i].x < s.points[j].x })
		}
	}
	return panels, nil
}

// Colors for bench/grow's strategies; others take the fallback palette in turn.
var colors = map[string]string{
	"buffer_geometric":  "#1b7837",
	"buffer_exact":      "#5aae61",
	"vmm_reserved":      "#2166ac",
	"vmm_doubling":      "#67a9cf",
	"memalloc_doubling": "#d6604d",
	"memalloc_exact":    "#b2182b",
}

var palette = []string{"#762a83", "#e08214", "#35978f", "#8c510a", "#c51b7d", "#4d4d4d"}

// Layout, in SVG user units.
const (
	plotW, plotH = 440.0, 300.0
	marginL      = 70.0  // y tick labels and axis title
	marginR      = 200.0 // the legend
	marginT      = 40.0  // panel title
	marginB      = 55.0  // x tick labels and axis title
	panelW       = marginL + plotW + marginR
	panelH       = marginT + plotH + marginB
	headerH      = 60.0
)

func render(panels []*panel, title, subtitle, logMode string) []byte {
	cols := min(len(panels), 2)
	rows := (len(panels) + cols - 1) / cols
	w, h := float64(cols)*panelW, headerH+float64(rows)*panelH
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%.0f" height="%.0f" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%.1f" y="24" font-size="16" font-weight="bold" text-anchor="middle">%s</text>`+"\n", w/2, esc(title))
	if subtitle != "" {
		fmt.Fprintf(&b, `<text x="%.1f" y="44" font-size="12" fill="#444" text-anchor="middle">%s</text>`+"\n", w/2, esc(subtitle))
	}
	assigned := map[string]string{} // the same strategy keeps its color across panels
	color := func(name string) string {
		if c, ok := colors[name]; ok {
			return c
		}
		if c, ok := assigned[name]; ok {
			return c
		}
		c := palette[len(assigned)%len(palette)]
		assigned[name] = c
		return c
	}
	for i, p := range panels {
		x0 := float64(i%cols) * panelW
		y0 := headerH + float64(i/cols)*panelH
		drawPanel(&b, p, x0, y0, logMode, color)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func drawPanel(b *bytes.Buffer, p *panel, x0, y0 float64, logMode string, color func(string) string) {
	left, top := x0+marginL, y0+marginT
	var xmax, ymin, ymax float64
	ymin = math.Inf(1)
	for _, s := range p.series {
		for _, pt := range s.points {
			xmax = max(xmax, pt.x)
			ymax = max(ymax, pt.y)
			if pt.y > 0 {
				ymin = min(ymin, pt.y)
			}
		}
	}
	if xmax <= 0 {
		xmax = 1
	}
	if math.IsInf(ymin, 1) { // every time is zero
		ymin, ymax = 1, 1
	}
	logY := logMode == "on" || (logMode == "auto" && ymax/ymin > 100)

	// Axes: x linear from 0; y linear from 0 or logarithmic over whole decades.
	xt := niceTicks(0, xmax)
	xhi := xt[len(xt)-1]
	var yt []float64
	var ylo, yhi float64
	if logY {
		lo, hi := math.Floor(math.Log10(ymin)), math.Ceil(math.Log10(ymax))
		if hi <= lo {
			hi = lo + 1
		}
		for e := lo; e <= hi; e++ {
			yt = append(yt, math.Pow(10, e))
		}
		ylo, yhi = yt[0], yt[len(yt)-1]
	} else {
		yt = niceTicks(0, max(ymax, 1e-9))
		ylo, yhi = 0, yt[len(yt)-1]
	}
	sx := func(x float64) float64 { return left + plotW*x/xhi }
	sy := func(y float64) float64 {
		var f float64
		if logY {
			y = max(y, ylo) // a zero time sits on the axis
			f = (math.Log10(y) - math.Log10(ylo)) / (math.Log10(yhi) - math.Log10(ylo))
		} else {
			f = (y - ylo) / (yhi - ylo)
		}
		return top + plotH*(1-f)
	}

	fmt.Fprintf(b, `<g class="panel">`+"\n")
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="14" font-weight="bold" text-anchor="middle">%s</text>`+"\n", left+plotW/2, y0+24, esc(panelTitle(p.run)))
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", left, top, plotW, plotH)
	for _, t := range xt {
		x := sx(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", x, top, x, top+plotH)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, top+plotH+16, fmtTick(t))
	}
	for _, t := range yt {
		y := sy(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", left, y, left+plotW, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, fmtTick(t))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">buffer size (GiB)</text>`+"\n", left+plotW/2, top+plotH+40)
	yTitle := "growth time, cumulative (ms)"
	if logY {
		yTitle += ", log scale"
	}
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", x0+18, top+plotH/2, yTitle)

	// One path per strategy, a dot at its end, and its legend entry with the total time.
	for i, s := range p.series {
		c := color(s.name)
		var d strings.Builder
		for j, pt := range s.points {
			cmd := "L"
			if j == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.2f %.2f ", cmd, sx(pt.x), sy(pt.y))
		}
		fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"><title>%s</title></path>`+"\n",
			strings.TrimSpace(d.String()), c, esc(s.name))
		last := s.points[len(s.points)-1]
		fmt.Fprintf(b, `<circle cx="%.2f" cy="%.2f" r="3" fill="%s"/>`+"\n", sx(last.x), sy(last.y), c)
		ly := top + 12 + float64(i)*34
		lx := left + plotW + 14
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", lx, ly, lx+22, ly, c)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+28, ly+4, esc(s.name))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#555" font-size="11">%s ms to %s GiB</text>`+"\n", lx+28, ly+18, fmtMS(last.y), fmtTick(last.x))
	}
	b.WriteString("</g>\n")
}

// panelTitle turns bench/grow's run label "16GiB/64MiB" into "16GiB in 64MiB steps".
func panelTitle(run string) string {
	if tot, step, ok := strings.Cut(run, "/"); ok {
		return "to " + tot + " in " + step + " steps"
	}
	return run
}

// niceTicks returns about five ticks from lo (0 here) to hi or just past it: quarters of hi
// when those are powers of two (16 GiB: 0, 4, 8, 12, 16), else at an interval of 1, 2 or 5
// times a power of ten.
func niceTicks(lo, hi float64) []float64 {
	span := hi - lo
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return []float64{lo, lo + 1}
	}
	// Buffer sizes are mostly powers of two GiB: quarters of one make the best ticks.
	if q := span / 4; lo == 0 && isPow2(q) {
		return []float64{0, q, 2 * q, 3 * q, 4 * q}
	}
	raw := span / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for i := 0; ; i++ {
		t := lo + float64(i)*step
		out = append(out, t)
		if t >= hi*(1-1e-12) || i > 100 {
			break
		}
	}
	return out
}

// isPow2 reports whether v is a power of two, 2^k for an integer k, negative ones too.
func isPow2(v float64) bool {
	frac, _ := math.Frexp(v)
	return v > 0 && frac == 0.5
}

func fmtTick(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func fmtMS(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
