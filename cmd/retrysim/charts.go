package main

import (
	"bytes"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The charts, drawn with gonum/plot and written as PNG and SVG.

const (
	chartW = 8 * vg.Inch
	chartH = 4 * vg.Inch
	dpi    = 120
)

// figure is what a chart draws on a canvas of its size.
type figure func(dc draw.Canvas)

// save writes f as dir/name.png and dir/name.svg, and returns the two
// file names.
func save(dir, name string, w, h vg.Length, f figure) ([]string, error) {
	png := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(color.White))
	f(draw.New(png))
	svg := vgsvg.New(w, h)
	f(draw.New(svg))
	var files []string
	for _, o := range []struct {
		ext string
		w   func(b *bytes.Buffer) error
	}{
		{"png", func(b *bytes.Buffer) error { _, err := vgimg.PngCanvas{Canvas: png}.WriteTo(b); return err }},
		{"svg", func(b *bytes.Buffer) error { _, err := svg.WriteTo(b); return err }},
	} {
		var b bytes.Buffer
		if err := o.w(&b); err != nil {
			return nil, fmt.Errorf("chart %s.%s: %w", name, o.ext, err)
		}
		file := filepath.Join(dir, name+"."+o.ext)
		if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
			return nil, err
		}
		files = append(files, file)
	}
	return files, nil
}

// single draws one plot.
func single(p *plot.Plot) figure {
	return p.Draw
}

// sideBySide draws plots in one row, their data areas aligned.
func sideBySide(ps ...*plot.Plot) figure {
	return func(dc draw.Canvas) {
		tiles := draw.Tiles{Rows: 1, Cols: len(ps), PadX: vg.Centimeter, PadTop: vg.Millimeter,
			PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
		cs := plot.Align([][]*plot.Plot{ps}, tiles, dc)
		for i, p := range ps {
			p.Draw(cs[0][i])
		}
	}
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	return p
}

// boxes adds one box plot per series of values, named on the x axis.
func boxes(p *plot.Plot, names []string, values [][]float64) error {
	for i, vs := range values {
		b, err := plotter.NewBoxPlot(vg.Points(28), float64(i), plotter.Values(vs))
		if err != nil {
			return err
		}
		b.FillColor = plotutil.Color(i)
		p.Add(b)
	}
	p.NominalX(names...)
	return nil
}

// bars adds one bar per value, named on the x axis, each labelled with
// its value as format gives it.
func bars(p *plot.Plot, names []string, values []float64, format string) error {
	for i, v := range values {
		b, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(60))
		if err != nil {
			return err
		}
		b.XMin = float64(i)
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		p.Add(b)
	}
	labels, err := plotter.NewLabels(barLabels(values, format))
	if err != nil {
		return err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].XAlign = text.XCenter
	}
	labels.Offset.Y = vg.Points(3)
	p.Add(labels)
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(values))-0.5 // room for the names
	return nil
}

func barLabels(values []float64, format string) plotter.XYLabels {
	l := plotter.XYLabels{XYs: make(plotter.XYs, len(values)), Labels: make([]string, len(values))}
	for i, v := range values {
		l.XYs[i] = plotter.XY{X: float64(i), Y: v}
		l.Labels[i] = fmt.Sprintf(format, v)
	}
	return l
}

// perSecond is a series of counts per second as points at each second's
// middle.
func perSecond(s series) plotter.XYs {
	xy := make(plotter.XYs, len(s.n))
	for i, k := range s.n {
		xy[i] = plotter.XY{X: (float64(i) + 0.5) * s.step.Seconds(), Y: float64(k) / s.step.Seconds()}
	}
	return xy
}

// timeline draws attempts per second of each run over time, with the
// outage shaded and the offered load dashed.
func timeline(title string, runs []*outageRun, colors []int) (*plot.Plot, error) {
	p := newPlot(title, "time (s)", "downstream attempts per second")
	o := runs[0].params
	top := 0.0
	for _, r := range runs {
		for _, xy := range perSecond(r.attempts) {
			top = max(top, xy.Y)
		}
	}
	top *= 1.6 // room for the legend above the lines
	shade, err := plotter.NewPolygon(plotter.XYs{
		{X: o.outage.from.Seconds(), Y: 0}, {X: o.outage.to.Seconds(), Y: 0},
		{X: o.outage.to.Seconds(), Y: top}, {X: o.outage.from.Seconds(), Y: top}})
	if err != nil {
		return nil, err
	}
	shade.Color = color.Gray{Y: 0xe8}
	shade.LineStyle.Width = 0
	p.Add(shade)
	phase := o.phase
	if phase == "" {
		phase = "outage"
	}
	p.Legend.Add(fmt.Sprintf("%s (%s)", phase, spanLabel(o.outage)), shade)
	offered, err := plotter.NewLine(plotter.XYs{{X: 0, Y: o.rate}, {X: o.duration.Seconds(), Y: o.rate}})
	if err != nil {
		return nil, err
	}
	offered.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	offered.Color = color.Gray{Y: 0x60}
	p.Add(offered)
	p.Legend.Add(fmt.Sprintf("offered load (%.0f calls/s)", o.rate), offered)
	for i, r := range runs {
		l, err := plotter.NewLine(perSecond(r.attempts))
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(colors[i])
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(r.name, l)
	}
	p.X.Min, p.X.Max = 0, o.duration.Seconds()
	p.Y.Min, p.Y.Max = 0, top
	p.Legend.Top = true
	p.Legend.XOffs = -vg.Points(4)
	return p, nil
}

func spanLabel(w window) string {
	return fmt.Sprintf("%g–%g s", w.from.Seconds(), w.to.Seconds())
}

// contentionFigure is scenario a's chart: calls and completion time per
// run, for each strategy.
func contentionFigure(res *contentionResult) (figure, error) {
	names := make([]string, len(strategies))
	calls := make([][]float64, len(strategies))
	done := make([][]float64, len(strategies))
	for i, st := range strategies {
		names[i] = shortName(st.name)
		for _, r := range res.runs[i] {
			calls[i] = append(calls[i], float64(r.calls))
			done[i] = append(done[i], r.done.Seconds())
		}
	}
	n := res.params.clients
	left := newPlot(fmt.Sprintf("Calls to the row, %d clients", n), "", "writes per run")
	if err := boxes(left, names, calls); err != nil {
		return nil, err
	}
	left.Y.Min = 0
	right := newPlot("Time until every client succeeded", "", "seconds per run")
	if err := boxes(right, names, done); err != nil {
		return nil, err
	}
	right.Y.Min = 0
	return sideBySide(left, right), nil
}

// shortName is a strategy's name on an axis.
func shortName(name string) string {
	switch name {
	case "decorrelated jitter":
		return "decorrelated"
	}
	return name
}

// failuresFigure is scenario c's chart: the success rate and the
// attempts per call of each budget, over the failure rates run, the
// bound's rate marked.
func failuresFigure(runs [][]*failuresRun, p failuresParams) (figure, error) {
	left := newPlot("Calls that succeeded", "attempts failing at random (%)", "% of calls")
	right := newPlot("Downstream attempts per call", "attempts failing at random (%)", "attempts")
	for _, pl := range []*plot.Plot{left, right} {
		mark, err := plotter.NewLine(plotter.XYs{{X: 100 * p.failP, Y: 0}, {X: 100 * p.failP, Y: 1000}})
		if err != nil {
			return nil, err
		}
		mark.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		mark.Color = color.Gray{Y: 0x60}
		pl.Add(mark)
		pl.Legend.Add(fmt.Sprintf("%g %% (the bound)", 100*p.failP), mark)
	}
	lowest := 100.0
	for j, v := range budgets {
		success := make(plotter.XYs, len(runs))
		perCall := make(plotter.XYs, len(runs))
		for i, row := range runs {
			x := 100 * row[j].failP
			success[i] = plotter.XY{X: x, Y: 100 * row[j].successRate()}
			perCall[i] = plotter.XY{X: x, Y: row[j].perCall()}
			lowest = min(lowest, success[i].Y)
		}
		for _, c := range []struct {
			pl  *plot.Plot
			xys plotter.XYs
		}{{left, success}, {right, perCall}} {
			l, pts, err := plotter.NewLinePoints(c.xys)
			if err != nil {
				return nil, err
			}
			l.Color, pts.Color = plotutil.Color(j), plotutil.Color(j)
			l.Width = vg.Points(1.5)
			pts.Shape = plotutil.Shape(j)
			c.pl.Add(l, pts)
			c.pl.Legend.Add(short(v.name), l, pts)
		}
	}
	top := 100 * p.sweep[len(p.sweep)-1]
	left.X.Min, left.X.Max, right.X.Min, right.X.Max = 0, top, 0, top
	left.Y.Min, left.Y.Max = 5*float64(int(lowest/5))-5, 100.5
	right.Y.Min, right.Y.Max = 1, 1.5
	left.Legend.Top = false
	left.Legend.Left = true
	left.Legend.XOffs, left.Legend.YOffs = vg.Points(6), vg.Points(6)
	right.Legend.Top = true
	right.Legend.Left = true
	right.Legend.XOffs = vg.Points(6)
	return sideBySide(left, right), nil
}

// short is a variant's name on an axis.
func short(name string) string {
	switch name {
	case noBudget.name:
		return "no budget"
	case tokenBucket.name:
		return "token bucket"
	case ratio.name:
		return "ratio"
	}
	return name
}

// nestedFigure is scenario d's chart.
func nestedFigure(runs []*nestedRun, p nestedParams) (figure, error) {
	names := make([]string, len(runs))
	per := make([]float64, len(runs))
	for i, r := range runs {
		names[i] = r.name
		per[i] = r.perUser()
	}
	pl := newPlot(fmt.Sprintf("%d nested Retriers of %d attempts, leaf down", p.layers, p.attempts), "", "leaf calls per user call")
	if err := bars(pl, names, per, "%.0f"); err != nil {
		return nil, err
	}
	pl.Y.Min = 0
	pl.Y.Max = 1.15 * max(per[0], per[len(per)-1])
	return single(pl), nil
}

// seconds formats d for a label.
func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// tailQuantiles are the call latency percentiles scenario g charts.
var tailQuantiles = []struct {
	q    float64
	name string
}{{0.5, "p50"}, {0.99, "p99"}, {0.999, "p99.9"}}

// tailFigure is scenario g's chart: the call latency percentiles of each
// variant, on a log scale, and the downstream's extra load.
func tailFigure(g *tailResult) (figure, error) {
	left := newPlot("Call latency, 1 % of attempts at 1 s", "percentile", "ms (log scale)")
	left.Y.Scale = plot.LogScale{}
	left.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	names := make([]string, len(tailQuantiles))
	for i, q := range tailQuantiles {
		names[i] = q.name
	}
	left.NominalX(names...)
	short := make([]string, len(g.runs))
	extra := make([]float64, len(g.runs))
	for j, r := range g.runs {
		xys := make(plotter.XYs, len(tailQuantiles))
		for i, q := range tailQuantiles {
			xys[i] = plotter.XY{X: float64(i), Y: float64(r.percentile(q.q)) / float64(time.Millisecond)}
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		l.Color, pts.Color = plotutil.Color(j), plotutil.Color(j)
		l.Width = vg.Points(1.5)
		pts.Shape = plotutil.Shape(j)
		left.Add(l, pts)
		short[j] = shortHedging(r.name)
		left.Legend.Add(short[j], l, pts)
		extra[j] = 100 * r.extraLoad()
	}
	left.X.Min, left.X.Max = -0.2, float64(len(tailQuantiles))-0.8
	left.Y.Min, left.Y.Max = 1, 30000 // the top decade for the legend
	left.Legend.Top = true
	left.Legend.Left = true
	left.Legend.XOffs, left.Legend.YOffs = vg.Points(6), -vg.Points(6)
	right := newPlot("Extra downstream calls", "", "% of calls")
	if err := bars(right, short, extra, "%.2f %%"); err != nil {
		return nil, err
	}
	bound, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 100 * tailMaxExtra}, {X: float64(len(extra)) - 0.5, Y: 100 * tailMaxExtra}})
	if err != nil {
		return nil, err
	}
	bound.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	bound.Color = color.Gray{Y: 0x60}
	right.Add(bound)
	right.Legend.Add(fmt.Sprintf("the bound (%g %%)", 100*tailMaxExtra), bound)
	right.Legend.Top = true
	right.Legend.Left = true
	right.Legend.XOffs, right.Legend.YOffs = vg.Points(6), -vg.Points(6)
	right.Y.Min, right.Y.Max = 0, 1.4*max(slices.Max(extra), 100*tailMaxExtra)
	return sideBySide(left, right), nil
}

// shortHedging is a variant of scenario g on an axis.
func shortHedging(name string) string {
	switch {
	case strings.HasPrefix(name, "no hedging"):
		return "no hedging"
	case strings.HasPrefix(name, "fixed delay"):
		return strings.TrimSuffix(strings.TrimPrefix(name, "fixed delay ("), ")") + " delay"
	case strings.HasPrefix(name, "adaptive"):
		return "adaptive delay"
	}
	return name
}

// stacked draws plots in one column, their data areas aligned.
func stacked(ps ...*plot.Plot) figure {
	return func(dc draw.Canvas) {
		tiles := draw.Tiles{Rows: len(ps), Cols: 1, PadY: vg.Centimeter / 2, PadTop: vg.Millimeter,
			PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
		col := make([][]*plot.Plot, len(ps))
		for i, p := range ps {
			col[i] = []*plot.Plot{p}
		}
		cs := plot.Align(col, tiles, dc)
		for i, p := range ps {
			p.Draw(cs[i][0])
		}
	}
}

// shade adds w as a grey band from 0 to top, named in the legend.
func shade(p *plot.Plot, w window, top float64, name string) error {
	band, err := plotter.NewPolygon(plotter.XYs{
		{X: w.from.Seconds(), Y: 0}, {X: w.to.Seconds(), Y: 0},
		{X: w.to.Seconds(), Y: top}, {X: w.from.Seconds(), Y: top}})
	if err != nil {
		return err
	}
	band.Color = color.Gray{Y: 0xe8}
	band.LineStyle.Width = 0
	p.Add(band)
	if name != "" {
		p.Legend.Add(name, band)
	}
	return nil
}

// dashed adds a dashed grey line through xys, named in the legend.
func dashed(p *plot.Plot, xys plotter.XYs, name string) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	l.Color = color.Gray{Y: 0x60}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// metastableFigure is scenario h's chart: the goodput of each variant
// over time above the downstream's load, the trigger shaded.
func metastableFigure(h *metastableResult) (figure, error) {
	p := h.params
	trigger := fmt.Sprintf("trigger: capacity %.0f → %.0f attempts/s (%s)", p.capacity, p.dropped, spanLabel(p.trigger))
	good := newPlot("Goodput", "time (s)", "calls that succeeded per second")
	load := newPlot("Downstream load", "time (s)", "attempts per second")
	goodTop, loadTop := 1.4*p.rate, 0.0
	for _, r := range h.runs {
		for _, xy := range perSecond(r.attempts) {
			loadTop = max(loadTop, xy.Y)
		}
	}
	loadTop *= 1.25
	if err := shade(good, p.trigger, goodTop, trigger); err != nil {
		return nil, err
	}
	if err := shade(load, p.trigger, loadTop, ""); err != nil {
		return nil, err
	}
	bar := recoveredShare * h.runs[0].before()
	end := p.duration.Seconds()
	if err := dashed(good, plotter.XYs{{X: 0, Y: bar}, {X: end, Y: bar}}, fmt.Sprintf("recovered: %g %% of the goodput before", 100*recoveredShare)); err != nil {
		return nil, err
	}
	from, to := p.trigger.from.Seconds(), p.trigger.to.Seconds()
	if err := dashed(load, plotter.XYs{{X: 0, Y: p.capacity}, {X: from, Y: p.capacity}, {X: from, Y: p.dropped},
		{X: to, Y: p.dropped}, {X: to, Y: p.capacity}, {X: end, Y: p.capacity}}, "capacity"); err != nil {
		return nil, err
	}
	for i, r := range h.runs {
		for _, c := range []struct {
			pl *plot.Plot
			s  series
		}{{good, r.calls.goodput}, {load, r.attempts}} {
			xys := perSecond(c.s)
			xys = xys[:min(len(xys), int(p.duration/c.s.step))]
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1.5)
			if i == len(h.runs)-1 {
				l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)} // both: on the limit's line
			}
			c.pl.Add(l)
			if c.pl == good {
				good.Legend.Add(r.name, l)
			}
		}
	}
	for _, pl := range []*plot.Plot{good, load} {
		pl.X.Min, pl.X.Max = 0, end
	}
	good.Y.Min, good.Y.Max = 0, goodTop
	load.Y.Min, load.Y.Max = 0, loadTop
	good.Legend.XOffs, good.Legend.YOffs = -vg.Points(4), vg.Points(12) // below the lines, above the one at zero
	load.Legend.Top = true
	load.Legend.XOffs = -vg.Points(4)
	return stacked(good, load), nil
}

// limitedFigure is scenario i's chart: for each variant, a panel of the
// requests that reached the downstream per second over time, the 429s
// among them, and the limit; every panel on the same scale, a tick at
// each window's reset.
func limitedFigure(runs []*limitedRun) (figure, error) {
	p := runs[0].params
	top := 0.0
	for _, r := range runs {
		for _, xy := range perSecond(r.reached) {
			top = max(top, xy.Y)
		}
	}
	top *= 1.4 // room for the legend
	end := p.duration.Seconds()
	var resets []plot.Tick
	for t := time.Duration(0); t <= p.duration; t += p.window {
		resets = append(resets, plot.Tick{Value: t.Seconds(), Label: fmt.Sprint(t.Seconds())})
	}
	ps := make([]*plot.Plot, len(runs))
	for i, r := range runs {
		pl := newPlot(r.name, "", "requests per second")
		for _, c := range []struct {
			s     series
			name  string
			color int
		}{{r.reached, fmt.Sprintf("requests that reached the downstream (per %s, as a rate)", span(limitedBin)), 2}, {r.refused, "of them, answered 429", 0}} {
			xys := perSecond(c.s)
			xys = xys[:min(len(xys), int(p.duration/c.s.step))]
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.Color = plotutil.Color(c.color)
			l.Width = vg.Points(1)
			pl.Add(l)
			pl.Legend.Add(c.name, l)
		}
		if err := dashed(pl, plotter.XYs{{X: 0, Y: p.perSecond}, {X: end, Y: p.perSecond}}, fmt.Sprintf("the limit, R = %.0f/s (%d per window of %s)", p.perSecond, p.quota(), span(p.window))); err != nil {
			return nil, err
		}
		if i > 0 {
			pl.Legend = plot.NewLegend() // the first panel's says it
		}
		pl.X.Min, pl.X.Max = 0, end
		pl.X.Tick.Marker = plot.ConstantTicks(resets)
		pl.Y.Min, pl.Y.Max = 0, top
		pl.Legend.Top = true
		pl.Legend.XOffs = -vg.Points(4)
		ps[i] = pl
	}
	ps[len(ps)-1].X.Label.Text = "time (s); a tick at each window's reset"
	return stacked(ps...), nil
}
