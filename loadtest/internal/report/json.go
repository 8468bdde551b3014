package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netwheel/netwheel/internal/hist"
)

// JSON writes r as indented JSON with its judgement j (docs/results.md):
// every time.Duration as a Go duration string ("1.5s"), histograms of
// nanoseconds in fields named _ns. r is not modified.
func JSON(w io.Writer, r *Result, j *Judgement) error {
	out := *r
	out.Judgement = j
	var buf bytes.Buffer
	if err := encode(&buf, reflect.ValueOf(&out)); err != nil {
		return fmt.Errorf("report: writing result: %w", err)
	}
	var ind bytes.Buffer
	if err := json.Indent(&ind, buf.Bytes(), "", "  "); err != nil {
		return fmt.Errorf("report: writing result: %w", err)
	}
	ind.WriteByte('\n')
	_, err := w.Write(ind.Bytes())
	return err
}

// ReadJSON reads a result written by JSON, of this Version only.
func ReadJSON(rd io.Reader) (*Result, error) {
	var v struct {
		Version int `json:"version"`
	}
	raw, err := io.ReadAll(rd)
	if err == nil {
		err = json.Unmarshal(raw, &v)
	}
	if err != nil {
		return nil, fmt.Errorf("report: reading result: %w", err)
	}
	if v.Version != Version {
		return nil, fmt.Errorf("report: result format version %d, want %d (docs/results.md)", v.Version, Version)
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return nil, fmt.Errorf("report: reading result: %w", err)
	}
	if generic, err = durations(reflect.TypeFor[Result](), generic); err != nil {
		return nil, fmt.Errorf("report: reading result: %w", err)
	}
	b, _ := json.Marshal(generic)
	var r Result
	dr := json.NewDecoder(bytes.NewReader(b))
	dr.DisallowUnknownFields()
	if err := dr.Decode(&r); err != nil {
		return nil, fmt.Errorf("report: reading result: %w", err)
	}
	if h := r.CloseDelay; h != nil {
		if err := h.Check(); err != nil {
			return nil, fmt.Errorf("report: reading result: %w", err)
		}
	}
	r.Judgement = nil // the figures say it again
	fillRead(&r)
	return &r, nil
}

// fillRead gives a read result the maps and histograms JSON may omit.
func fillRead(r *Result) {
	if l := r.SelfLag; l != nil && l.Lag == nil {
		l.Lag = &hist.Histogram{}
	}
	for _, s := range r.Scenarios {
		n := NewScenario(s.Name, "")
		s.DialErrors = cmpOr(s.DialErrors, n.DialErrors)
		s.Errors = cmpOr(s.Errors, n.Errors)
		s.Ends = cmpOr(s.Ends, n.Ends)
		if s.RetxCount == nil {
			s.RetxCount = n.RetxCount
		}
		for _, h := range []**hist.Histogram{&s.Latency, &s.Connect, &s.CloseAfter} {
			if *h == nil {
				*h = &hist.Histogram{}
			}
		}
		if c := s.Closes; c != nil {
			e := newCloses(c.Expect)
			c.OtherReason = cmpOr(c.OtherReason, e.OtherReason)
			if c.Wire == nil {
				c.Wire = e.Wire
			}
		}
		for _, ro := range s.Roles {
			ro.Ends = cmpOr(ro.Ends, map[string]int{})
			if ro.CloseAfter == nil {
				ro.CloseAfter = &hist.Histogram{}
			}
		}
	}
}

func cmpOr(m, empty map[string]int) map[string]int {
	if m == nil {
		return empty
	}
	return m
}

var (
	durationType  = reflect.TypeFor[time.Duration]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
)

// encode appends v as encoding/json writes it, but for a time.Duration,
// which it writes as a Go duration string. It knows the kinds the result's
// types use: structs (json tags, omitempty, omitzero), pointers, slices,
// arrays, maps, and values that marshal themselves.
func encode(buf *bytes.Buffer, v reflect.Value) error {
	if v.Type() == durationType {
		buf.WriteString(strconv.Quote(time.Duration(v.Int()).String()))
		return nil
	}
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.IsNil() {
		buf.WriteString("null")
		return nil
	}
	if v.Type().Implements(marshalerType) || v.Kind() != reflect.Pointer && reflect.PointerTo(v.Type()).Implements(marshalerType) && v.CanAddr() {
		b, err := json.Marshal(v.Interface())
		buf.Write(b)
		return err
	}
	switch v.Kind() {
	case reflect.Pointer:
		return encode(buf, v.Elem())
	case reflect.Struct:
		buf.WriteByte('{')
		first := true
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			fv := v.Field(i)
			if !f.IsExported() || name == "-" || strings.Contains(opts, "omitempty") && empty(fv) || strings.Contains(opts, "omitzero") && fv.IsZero() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if !first {
				buf.WriteByte(',')
			}
			first = false
			buf.WriteString(strconv.Quote(name) + ":")
			if err := encode(buf, fv); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case reflect.Slice, reflect.Array:
		buf.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encode(buf, v.Index(i)); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case reflect.Map:
		keys := v.MapKeys()
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = fmt.Sprint(k.Interface())
		}
		order := make([]int, len(keys))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
		buf.WriteByte('{')
		for n, i := range order {
			if n > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(strconv.Quote(names[i]) + ":")
			if err := encode(buf, v.MapIndex(keys[i])); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		b, err := json.Marshal(v.Interface())
		buf.Write(b)
		return err
	}
	return nil
}

// empty is encoding/json's omitempty test.
func empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// durations returns v, decoded JSON of type t, with every Go duration
// string where t has a time.Duration turned into its nanoseconds, as
// encoding/json reads a Duration.
func durations(t reflect.Type, v any) (any, error) {
	if t == durationType {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("want a Go duration string, got %v", v)
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, err
		}
		return json.Number(strconv.FormatInt(int64(d), 10)), nil
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		return v, nil
	}
	var err error
	switch t.Kind() {
	case reflect.Pointer:
		return durations(t.Elem(), v)
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return v, nil
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			if x, ok := m[name]; ok && x != nil {
				if m[name], err = durations(f.Type, x); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
			}
		}
	case reflect.Slice, reflect.Array:
		a, _ := v.([]any)
		for i := range a {
			if a[i], err = durations(t.Elem(), a[i]); err != nil {
				return nil, err
			}
		}
	case reflect.Map:
		m, _ := v.(map[string]any)
		for k := range m {
			if m[k], err = durations(t.Elem(), m[k]); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}
