package report

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/netwheel/netwheel/internal/hist"
)

// ErrMerge is wrapped by every error of Merge.
var ErrMerge = errors.New("report: cannot merge")

// Merge combines the results of several runs, normally the shards of one
// test, into a new Result: counts add up, histograms merge, the time span
// covers all runs; the inputs are not modified. The server's own close
// delay is added up bucket by bucket when every run has it with the same
// buckets and no two runs read the same external server; otherwise it is
// dropped with a note. The runs must share
// version, protocol, scenarios and timeouts; a shard that appears twice is
// refused, since its connections would count double.
func Merge(rs ...*Result) (*Result, error) {
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w: no results", ErrMerge)
	}
	first := rs[0]
	out := &Result{Version: Version, Config: first.Config, Start: first.Start, End: first.End}
	seen := map[string]bool{}
	for i, r := range rs {
		if r.Version != Version {
			return nil, fmt.Errorf("%w: result %d has format version %d, want %d", ErrMerge, i+1, r.Version, Version)
		}
		if r.Config.Proto != first.Config.Proto || r.Config.Timeouts != first.Config.Timeouts ||
			!slices.Equal(r.Config.Scenarios, first.Config.Scenarios) {
			return nil, fmt.Errorf("%w: result %d was run with another protocol, scenarios or timeouts", ErrMerge, i+1)
		}
		for _, sh := range r.Shards {
			if seen[sh] && sh != "" {
				return nil, fmt.Errorf("%w: shard %s appears twice", ErrMerge, sh)
			}
			seen[sh] = true
			out.Shards = append(out.Shards, sh)
		}
		if r.Start.Before(out.Start) {
			out.Start = r.Start
		}
		if r.End.After(out.End) {
			out.End = r.End
		}
		out.Limits = appendNew(out.Limits, r.Limits...)
		out.Notes = appendNew(out.Notes, r.Notes...)
		out.Leaks = appendNew(out.Leaks, r.Leaks...)
		if i > 0 {
			out.Config.Duration = max(out.Config.Duration, r.Config.Duration)
		}
		for _, s := range r.Scenarios {
			m := out.Scenario(s.Name)
			if m == nil {
				m = NewScenario(s.Name, "")
				out.Scenarios = append(out.Scenarios, m)
			}
			add(reflect.ValueOf(m).Elem(), reflect.ValueOf(s).Elem())
		}
		if r.Server != nil && len(rs) == 1 {
			out.Server = r.Server
		}
		if r.Process != nil && len(rs) == 1 {
			out.Process = r.Process
		}
		if r.Remote != nil && len(rs) == 1 {
			out.Remote = r.Remote
		}
		if r.Memory != nil && len(rs) == 1 {
			out.Memory = r.Memory
		}
		if r.SelfLag != nil {
			out.SelfLag = cmp.Or(out.SelfLag, &SelfLag{})
			add(reflect.ValueOf(out.SelfLag).Elem(), reflect.ValueOf(r.SelfLag).Elem())
		}
	}
	cd, note := mergeCloseDelay(rs)
	out.CloseDelay = cd
	if note != "" {
		out.Notes = appendNew(out.Notes, note)
	}
	if len(rs) > 1 {
		but := ""
		if cd != nil {
			but = " (but for the server's own close delay, added up)"
		}
		out.Notes = appendNew(out.Notes, fmt.Sprintf("merged from %d results; server and process figures are per run and not merged%s", len(rs), but))
	}
	return out, nil
}

func appendNew(dst []string, src ...string) []string {
	for _, s := range src {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

var histType = reflect.TypeFor[*hist.Histogram]()

// add adds src's figures to dst's, two structs of one type, field by
// field: numbers add up (with the tag merge:"max", the larger is kept;
// with merge:"first", dst's unless zero), histograms merge, counts by
// key add up, nested figures (*Closes, roles) add up alike, and any
// other field keeps dst's unless zero. What dst lacks is made; src is
// not modified.
func add(dst, src reflect.Value) {
	for i := range dst.NumField() {
		d, s, tag := dst.Field(i), src.Field(i), dst.Type().Field(i).Tag.Get("merge")
		if s.IsZero() {
			continue
		}
		switch k := d.Kind(); {
		case tag == "max":
			d.SetInt(max(d.Int(), s.Int()))
		case d.Type() == histType:
			if d.IsNil() {
				d.Set(reflect.ValueOf(&hist.Histogram{}))
			}
			d.Interface().(*hist.Histogram).Merge(s.Interface().(*hist.Histogram))
		case k == reflect.Slice && d.Type().Elem() == histType:
			for j := range s.Len() {
				if j == d.Len() {
					d.Set(reflect.Append(d, reflect.ValueOf(&hist.Histogram{})))
				}
				d.Index(j).Interface().(*hist.Histogram).Merge(s.Index(j).Interface().(*hist.Histogram))
			}
		case tag == "" && (k == reflect.Int || k == reflect.Int64):
			d.SetInt(d.Int() + s.Int())
		case tag == "" && k == reflect.Uint64:
			d.SetUint(d.Uint() + s.Uint())
		case tag == "" && k == reflect.Pointer && d.Type().Elem().Kind() == reflect.Struct:
			if d.IsNil() {
				d.Set(reflect.New(d.Type().Elem()))
			}
			add(d.Elem(), s.Elem())
		case tag == "" && k == reflect.Map:
			if d.IsNil() {
				d.Set(reflect.MakeMap(d.Type()))
			}
			for it := s.MapRange(); it.Next(); {
				old := d.MapIndex(it.Key())
				if v := it.Value(); v.Kind() == reflect.Pointer { // figures by name (roles)
					if !old.IsValid() {
						old = reflect.New(v.Type().Elem())
						d.SetMapIndex(it.Key(), old)
					}
					add(old.Elem(), v.Elem())
				} else if old.IsValid() {
					d.SetMapIndex(it.Key(), reflect.ValueOf(old.Int()+v.Int()).Convert(v.Type()))
				} else {
					d.SetMapIndex(it.Key(), v)
				}
			}
		case d.IsZero():
			d.Set(s)
		}
	}
}
