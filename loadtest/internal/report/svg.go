package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/netwheel/netwheel/internal/hist"
)

const (
	panelW, panelH = 720, 210
	plotL, plotR   = 60, 20
	plotT, plotB   = 30, 40
	bins           = 60
)

type panel struct {
	title string
	h     *hist.Histogram
	log   bool // logarithmic x axis (latencies); linear for signed errors
}

func panels(r *Result) []panel {
	var ps []panel
	for _, s := range r.Scenarios {
		if s.Latency != nil && s.Latency.Count() > 0 {
			ps = append(ps, panel{title: s.Name + ": round-trip latency (" + fmt.Sprint(s.Latency.Count()) + " messages)", h: s.Latency, log: true})
		}
		if c := s.Closes; c != nil && c.FromEnd.Count() > 0 {
			ps = append(ps, panel{title: fmt.Sprintf("%s: close error, observed - %s deadline from the last answer (%d connections)", s.Name, c.Expect, c.FromEnd.Count()), h: c.FromEnd})
		}
	}
	return ps
}

// SVG draws one histogram panel per latency and close-error distribution,
// with the p50 and p99 marked.
func SVG(w io.Writer, r *Result) error {
	ps := panels(r)
	var b strings.Builder
	height := max(len(ps), 1) * panelH
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", panelW, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	if len(ps) == 0 {
		fmt.Fprintf(&b, `<text x="20" y="40">no distributions recorded</text>`+"\n")
	}
	for i, p := range ps {
		drawPanel(&b, p, i*panelH)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// HTML wraps the SVG in a page with the text report of r and its judgement j.
func HTML(w io.Writer, r *Result, j *Judgement) error {
	var txt, svg strings.Builder
	Text(&txt, r, j)
	if err := SVG(&svg, r); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>netwheel load test</title></head><body>\n<pre>%s</pre>\n%s</body></html>\n",
		html.EscapeString(txt.String()), svg.String())
	return err
}

func drawPanel(b *strings.Builder, p panel, y0 int) {
	h := p.h
	lo, hi := float64(h.Min()), float64(h.Max())
	tr := func(v float64) float64 { return v }
	if p.log {
		lo, hi = math.Max(lo, 1000), math.Max(hi, 1000) // 1µs floor
		tr = func(v float64) float64 { return math.Log10(math.Max(v, 1000)) }
	}
	a, z := tr(lo), tr(hi)
	if z <= a {
		z = a + 1
	}
	var counts [bins]uint64
	h.Each(func(blo, bhi int64, c uint64) {
		mid := tr(float64(blo)/2 + float64(bhi)/2)
		i := int((mid - a) / (z - a) * bins)
		counts[min(max(i, 0), bins-1)] += c
	})
	var peak uint64
	for _, c := range counts {
		peak = max(peak, c)
	}
	pw := float64(panelW - plotL - plotR)
	ph := float64(panelH - plotT - plotB)
	x := func(v float64) float64 { return plotL + (tr(v)-a)/(z-a)*pw }
	base := float64(y0 + plotT)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", plotL, y0+18, html.EscapeString(p.title))
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>`+"\n", plotL, base+ph, panelW-plotR, base+ph)
	for i, c := range counts {
		if c == 0 {
			continue
		}
		bh := float64(c) / float64(peak) * ph
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#4a7ab5"><title>%d</title></rect>`+"\n",
			plotL+float64(i)*pw/bins, base+ph-bh, pw/bins-1, bh, c)
	}
	for k := 0; k <= 4; k++ { // axis ticks
		t := a + (z-a)*float64(k)/4
		v := t
		if p.log {
			v = math.Pow(10, t)
		}
		px := plotL + float64(k)/4*pw
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
			px, base+ph, px, base+ph+4, px, base+ph+16, D(int64(v)))
	}
	for _, q := range []struct {
		name string
		q    float64
		col  string
	}{{"p50", 0.5, "#2a9d3a"}, {"p99", 0.99, "#d62728"}} {
		v := float64(h.Quantile(q.q))
		px := x(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4 2"/><text x="%.1f" y="%.1f" fill="%s">%s %s</text>`+"\n",
			px, base, px, base+ph, q.col, px+3, base+10, q.col, q.name, D(int64(v)))
	}
	fmt.Fprintf(b, `<text x="%d" y="%.1f" fill="#555">count (max %d per bin)</text>`+"\n", plotL, base+ph+32, peak)
}
