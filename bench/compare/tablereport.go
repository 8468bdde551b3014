package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/netwheel/netwheel/bench/internal/baseline"
)

// This file is the table's figures and their rendering: plain data and
// pure functions, apart from the run that fills them (table.go).

// tableFigures is one server's figures in one round. A figure not measured
// (its phase failed or found nothing to measure) is NaN, or zero for the
// counts.
type tableFigures struct {
	closedRate float64 // closed loop: echoed messages/s
	fixedP99   float64 // fixed rate: latency p99, ns
	fixedRate  float64 // fixed rate: echoed messages/s (for the progress line)
	cpu        float64 // fixed rate: the server process's CPU time over the phase, s
	// Reap: the close error (observed close - last message - idle timeout)
	// of the connections the server closed, ns, and how many it closed of
	// those it had to.
	reapP50, reapP99, reapMax float64
	// reapAckP99 is the p99 of the close error measured from the arrival
	// of the server's echo of the last message instead of its send: a lower
	// bound of the reap's lateness where reapP99 is an upper bound (the
	// server reads the message between the two), ns.
	reapAckP99 float64
	// reapOwnP99 is the p99 of the server's own account of its timeout
	// closes, from each deadline to its close call
	// (baseline.CloseDelayMetric, read from the server's metrics; a bucket's
	// upper bound), ns: what the server does, whatever the client sharing
	// its cores sees.
	reapOwnP99 float64
	// reapWireP99 is the p99 of the close error from the kernel's
	// timestamps of the server's FINs (loadtest -fins), ns: the reap's
	// lateness without the client's delay to read the close. NaN without
	// a capture.
	reapWireP99              float64
	reapClosed, reapExpected int
	rssStart, rssOpen        float64 // bytes: before any connection, and with rssConns open
	rssConns                 int
}

// newTableFigures returns figures with nothing measured yet.
func newTableFigures() tableFigures {
	n := math.NaN()
	return tableFigures{closedRate: n, fixedP99: n, fixedRate: n, cpu: n, reapP50: n, reapP99: n, reapMax: n, reapAckP99: n, reapOwnP99: n, reapWireP99: n, rssStart: n, rssOpen: n}
}

// rssPerConn is the server's RSS growth per open connection, bytes.
func (f *tableFigures) rssPerConn() float64 {
	if f.rssConns <= 0 {
		return math.NaN()
	}
	return (f.rssOpen - f.rssStart) / float64(f.rssConns)
}

// neverReaped reports whether the server had idle connections to close and
// closed none: a server with no timers.
func (f *tableFigures) neverReaped() bool { return f.reapExpected > 0 && f.reapClosed == 0 }

// reapFigure returns get(f), or NaN for a server that never reaps.
func reapFigure(get func(*tableFigures) float64) func(*tableFigures) float64 {
	return func(f *tableFigures) float64 {
		if f.neverReaped() {
			return math.NaN()
		}
		return get(f)
	}
}

// Kinds of comparison to the reference server a row has.
const (
	noRatio   = iota
	ratioTo   // value / the reference's
	diffOfRef // value - the reference's
	absolute  // the value itself: a figure the reference may not have (the reaps)
)

// tableRow is one figure of the table for every server and round.
type tableRow struct {
	phase   string // the phase that measures it
	label   string
	value   func(*tableFigures) float64 // NaN: none
	format  func(float64) string
	unit    string // after the per-round figures of a cell
	compare int    // noRatio, ratioTo, diffOfRef or absolute
	// ratioLabel labels the row's comparison in the ratio table, or its
	// summary over rounds (absolute).
	ratioLabel string
	// missing is what a cell says for a server without the figure
	// ("never" for reaps), "-" if empty.
	missing string
}

// tableSpec is what the rows' labels and the heading say about the run.
type tableSpec struct {
	closedConns  int
	closedFor    time.Duration
	fixedConns   int
	fixedRate    float64
	fixedFor     time.Duration
	idleConns    int
	idleTimeout  time.Duration
	rssConns     int
	rssHold      time.Duration
	trafficIdle  time.Duration
	settleReap   time.Duration // the rest before the reap phase (see settleBefore)
	phases       []string      // the phases run, in tablePhases' order
	size, rounds int
	servers      []string
	reference    int // index in servers
	netwheelArgs string
}

// settleBefore returns how long the machine rests before phase starts in
// each round (before the phase's first server runs): -settle-reap before
// the reap phase when another phase ran before it (the reap phase is each
// round's last; no phases listed means all), and nothing otherwise. Why:
// docs/perf.md, "The server against its baselines".
func (s *tableSpec) settleBefore(phase string) time.Duration {
	if phase == phaseReap && len(s.phases) != 1 {
		return s.settleReap
	}
	return 0
}

func fixed(prec int) func(float64) string {
	return func(v float64) string { return strconv.FormatFloat(v, 'f', prec, 64) }
}

// kilo formats a rate as 79.6k (or 950 below a thousand).
func kilo(v float64) string {
	if math.Abs(v) < 1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v/1000, 'f', 1, 64) + "k"
}

func scaled(div float64, prec int) func(float64) string {
	return func(v float64) string { return strconv.FormatFloat(v/div, 'f', prec, 64) }
}

// tableRows returns the rows of the phases s ran (all with none named), in
// print order.
func tableRows(s tableSpec) []tableRow {
	ms := scaled(1e6, 2)
	all := []tableRow{
		{phase: phaseClosed, label: fmt.Sprintf("msgs/s, %d conns, closed loop", s.closedConns), value: func(f *tableFigures) float64 { return f.closedRate },
			format: kilo, compare: ratioTo, ratioLabel: "msgs/s, closed loop"},
		{phase: phaseFixed, label: fmt.Sprintf("p99, %d conns at %s msg/s each", s.fixedConns, strconv.FormatFloat(s.fixedRate, 'f', -1, 64)),
			value: func(f *tableFigures) float64 { return f.fixedP99 }, format: ms, unit: "ms", compare: ratioTo, ratioLabel: "p99 at the fixed rate"},
		{phase: phaseFixed, label: "server CPU at that fixed rate", value: func(f *tableFigures) float64 { return f.cpu }, format: fixed(2), unit: "s",
			compare: ratioTo, ratioLabel: "server CPU at the fixed rate"},
		{phase: phaseReap, label: fmt.Sprintf("%d idle reaped: error p50", s.idleConns), value: reapFigure(func(f *tableFigures) float64 { return f.reapP50 }),
			format: ms, unit: "ms", missing: "never"},
		{phase: phaseReap, label: "  error p99", value: reapFigure(func(f *tableFigures) float64 { return f.reapP99 }), format: ms, unit: "ms", missing: "never",
			compare: absolute, ratioLabel: "reap error p99"},
		{phase: phaseReap, label: "  error max", value: reapFigure(func(f *tableFigures) float64 { return f.reapMax }), format: ms, unit: "ms", missing: "never"},
		{phase: phaseReap, label: "  error p99 from the echo", value: reapFigure(func(f *tableFigures) float64 { return f.reapAckP99 }), format: ms, unit: "ms",
			missing: "never", compare: absolute, ratioLabel: "reap error p99 from the echo"},
		{phase: phaseReap, label: "  error p99 on the wire (FIN)", value: reapFigure(func(f *tableFigures) float64 { return f.reapWireP99 }), format: ms, unit: "ms",
			compare: absolute, ratioLabel: "reap error p99 on the wire (FIN)"},
		{phase: phaseReap, label: "  server's own close delay p99", value: reapFigure(func(f *tableFigures) float64 { return f.reapOwnP99 }), format: ms, unit: "ms",
			missing: "never", compare: absolute, ratioLabel: "server's own close delay p99"},
		{phase: phaseRSS, label: "RSS at start", value: func(f *tableFigures) float64 { return f.rssStart }, format: scaled(1<<20, 1), unit: "MiB"},
		{phase: phaseRSS, label: fmt.Sprintf("RSS with %d open", s.rssConns), value: func(f *tableFigures) float64 { return f.rssOpen }, format: scaled(1<<20, 1),
			unit: "MiB", compare: ratioTo, ratioLabel: fmt.Sprintf("RSS with %d open", s.rssConns)},
		{phase: phaseRSS, label: "  per conn above start", value: func(f *tableFigures) float64 { return f.rssPerConn() }, format: scaled(1<<10, 2),
			unit: "KiB", compare: diffOfRef, ratioLabel: "RSS per conn minus the reference's"},
	}
	if len(s.phases) == 0 {
		return all
	}
	return slices.DeleteFunc(all, func(r tableRow) bool { return !slices.Contains(s.phases, r.phase) })
}

// cell renders one server's figures of a row over the rounds: each
// round's, joined by " / ", then the unit; a server with none in any round
// gets the row's missing text once.
func cell(r tableRow, figs []tableFigures) string {
	missing := r.missing
	if missing == "" {
		missing = "-"
	}
	parts := make([]string, len(figs))
	any := false
	for i := range figs {
		v := r.value(&figs[i])
		if math.IsNaN(v) {
			parts[i] = missing
			continue
		}
		parts[i], any = r.format(v), true
	}
	if !any {
		return missing
	}
	s := strings.Join(parts, " / ")
	if r.unit != "" {
		s += " " + r.unit
	}
	return s
}

// perRound returns, for every round where both the server and the
// reference have the figure, the server's ratio to the reference's (a
// reference of zero gives none) or its difference from it.
func perRound(vals, refs []float64, compare int) []float64 {
	var out []float64
	for i := range min(len(vals), len(refs)) {
		v, ref := vals[i], refs[i]
		if math.IsNaN(v) || math.IsNaN(ref) {
			continue
		}
		switch compare {
		case ratioTo:
			if ref != 0 {
				out = append(out, v/ref)
			}
		case diffOfRef:
			out = append(out, v-ref)
		}
	}
	return out
}

// spread returns the median, minimum and maximum of xs; ok is false for
// none.
func spread(xs []float64) (med, lo, hi float64, ok bool) {
	if len(xs) == 0 {
		return 0, 0, 0, false
	}
	return median(xs), slices.Min(xs), slices.Max(xs), true
}

// ratioCell renders a server's per-round comparisons to the reference:
// "median [min-max]" for ratios, "+median [min, max]" for differences
// (in the row's unit), "median [min-max] unit" for a row's own figures
// (absolute), "-" for none.
func ratioCell(r tableRow, xs []float64) string {
	med, lo, hi, ok := spread(xs)
	switch {
	case !ok:
		return "-"
	case r.compare == absolute:
		return fmt.Sprintf("%s [%s-%s] %s", r.format(med), r.format(lo), r.format(hi), r.unit)
	case r.compare == diffOfRef:
		f := func(v float64) string {
			s := r.format(v)
			if !strings.HasPrefix(s, "-") {
				s = "+" + s
			}
			return s
		}
		return fmt.Sprintf("%s [%s, %s]", f(med), f(lo), f(hi))
	}
	return fmt.Sprintf("%.2f [%.2f-%.2f]", med, lo, hi)
}

// series returns a row's figure of one server over the rounds.
func series(r tableRow, figs []tableFigures) []float64 {
	out := make([]float64, len(figs))
	for i := range figs {
		out[i] = r.value(&figs[i])
	}
	return out
}

// serverTitles say what each server of the table is.
var serverTitles = map[string]string{
	kindNetwheel:               "cmd/echo",
	baseline.KindGnet:          "bare gnet v2, no timers",
	baseline.KindGnetAfterFunc: "gnet + time.AfterFunc per connection",
	baseline.KindNetDeadline:   "goroutine per connection + SetReadDeadline",
	baseline.KindNbio:          "nbio + SetReadDeadline",
}

// renderTable writes the table of figs ([server][round], servers in
// s.servers' order) and the per-round comparisons to the reference, then
// the notes.
func renderTable(w io.Writer, s tableSpec, figs [][]tableFigures, notes []string) {
	roundsCell, rounds := "round 1", "1 round"
	for i := 2; i <= s.rounds; i++ {
		roundsCell += " / round " + strconv.Itoa(i)
		rounds = strconv.Itoa(i) + " rounds in alternating order"
	}
	ref := s.servers[s.reference]
	fmt.Fprintf(w, "Raw echo on loopback, each server in a process of its own, %s; each cell: %s.\n", rounds, roundsCell)
	rows := tableRows(s)
	var what []string
	for i, r := range rows { // the phases run, in the rows' order
		if i > 0 && rows[i-1].phase == r.phase {
			continue
		}
		switch r.phase {
		case phaseClosed:
			what = append(what, "closed loop for "+s.closedFor.String())
		case phaseFixed:
			what = append(what, "fixed rate for "+s.fixedFor.String())
		case phaseRSS:
			what = append(what, fmt.Sprintf("RSS read %s after the last of %d connections echoed a message", s.rssHold, s.rssConns))
		case phaseReap:
			reap := "reap"
			if d := s.settleBefore(phaseReap); d > 0 {
				reap += " (after " + d.String() + " at rest)"
			}
			what = append(what, reap+": idle timeout "+s.idleTimeout.String())
		}
	}
	fmt.Fprintf(w, "Phases: %s.\n", strings.Join(what, "; "))
	fmt.Fprintf(w, "%d-byte messages. The servers' idle timeout outside the reap phase: %s.\n", s.size, s.trafficIdle)
	for _, k := range s.servers {
		switch t := serverTitles[k]; k {
		case kindNetwheel:
			fmt.Fprintf(w, "  %-14s %s %s, every other setting its default\n", k, t, s.netwheelArgs)
		default:
			fmt.Fprintf(w, "  %-14s %s (compare serve -server %s)\n", k, t, k)
		}
	}
	fmt.Fprintln(w)

	grid := [][]string{append([]string{""}, s.servers...)}
	for _, r := range rows {
		line := []string{r.label}
		for i := range s.servers {
			line = append(line, cell(r, figs[i]))
		}
		grid = append(grid, line)
	}
	if slices.ContainsFunc(rows, func(r tableRow) bool { return r.compare == ratioTo || r.compare == diffOfRef }) {
		grid = append(grid, []string{""}, []string{"Per-round ratio to " + ref + ", median [min-max] over rounds:"})
	}
	for _, r := range rows {
		if r.compare == noRatio || r.compare == absolute {
			continue
		}
		refs := series(r, figs[s.reference])
		label := r.ratioLabel
		if r.compare == diffOfRef {
			label = strings.Replace(label, "the reference's", ref+"'s", 1) + ", " + r.unit
		}
		refCell := "1"
		if r.compare == diffOfRef {
			refCell = "0"
		}
		if !slices.ContainsFunc(refs, func(v float64) bool { return !math.IsNaN(v) }) {
			label, refCell = label+": none from "+ref, "-"
		}
		line := []string{label}
		for i := range s.servers {
			if i == s.reference {
				line = append(line, refCell)
				continue
			}
			line = append(line, ratioCell(r, perRound(series(r, figs[i]), refs, r.compare)))
		}
		grid = append(grid, line)
	}
	if slices.ContainsFunc(rows, func(r tableRow) bool { return r.compare == absolute }) {
		grid = append(grid, []string{""}, []string{"Per-round figures, median [min-max] over rounds:"})
		for _, r := range rows {
			if r.compare != absolute {
				continue
			}
			line := []string{r.ratioLabel}
			for i := range s.servers {
				xs := slices.DeleteFunc(series(r, figs[i]), math.IsNaN)
				c := ratioCell(r, xs)
				if c == "-" && r.missing != "" {
					c = r.missing
				}
				line = append(line, c)
			}
			grid = append(grid, line)
		}
	}
	writeGrid(w, grid)
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
}

// writeGrid writes rows of cells in columns as wide as their widest cell,
// the first left-aligned, the others right-aligned, two spaces apart. A
// row of one cell is a heading, written as it is.
func writeGrid(w io.Writer, grid [][]string) {
	var widths []int
	for _, row := range grid {
		if len(row) == 1 {
			continue
		}
		for j, c := range row {
			if j == len(widths) {
				widths = append(widths, 0)
			}
			widths[j] = max(widths[j], utf8.RuneCountInString(c))
		}
	}
	for _, row := range grid {
		if len(row) == 1 {
			fmt.Fprintln(w, row[0])
			continue
		}
		var b strings.Builder
		for j, c := range row {
			pad := strings.Repeat(" ", widths[j]-utf8.RuneCountInString(c))
			if j == 0 {
				b.WriteString(c + pad)
				continue
			}
			b.WriteString("  " + pad + c)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs is not modified. It returns 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
