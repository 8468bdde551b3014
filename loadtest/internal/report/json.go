package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// JSON writes r as indented JSON with its judgement j (docs/results.md):
// every time.Duration as a Go duration string ("1.5s"), histograms of
// nanoseconds in fields named _ns; the top level in field order, objects
// below it with their keys in alphabetical order. r is not modified.
func JSON(w io.Writer, r *Result, j *Judgement) error {
	out := *r
	out.Judgement = j
	v, err := generic(&out)
	if err == nil {
		v, err = durations(reflect.TypeFor[Result](), v, true)
	}
	if err != nil {
		return fmt.Errorf("report: writing result: %w", err)
	}
	// The top level in the order of Result's fields (version first);
	// objects below it in alphabetical order.
	m, _ := v.(map[string]any)
	var b bytes.Buffer
	b.WriteString("{")
	t := reflect.TypeFor[Result]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		x, ok := m[name]
		if !ok {
			continue
		}
		val, err := json.MarshalIndent(x, "  ", "  ")
		if err != nil {
			return fmt.Errorf("report: writing result: %w", err)
		}
		if b.Len() > 1 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n  %q: %s", name, val)
	}
	b.WriteString("\n}\n")
	_, err = w.Write(b.Bytes())
	return err
}

// ReadJSON reads a result written by JSON, of this Version only.
func ReadJSON(rd io.Reader) (*Result, error) {
	var v any
	dec := json.NewDecoder(rd)
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("report: reading result: %w", err)
	}
	m, _ := v.(map[string]any)
	if ver := fmt.Sprint(m["version"]); ver != strconv.Itoa(Version) {
		return nil, fmt.Errorf("report: result format version %s, want %d (docs/results.md)", ver, Version)
	}
	v, err := durations(reflect.TypeFor[Result](), v, false)
	if err != nil {
		return nil, fmt.Errorf("report: reading result: %w", err)
	}
	b, _ := json.Marshal(v)
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
	for _, s := range r.Scenarios {
		fill(s) // what JSON omits when empty
	}
	if r.SelfLag != nil {
		fill(r.SelfLag)
	}
	return &r, nil
}

// generic returns v as encoding/json writes it, decoded into maps, lists
// and json.Numbers.
func generic(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	return out, dec.Decode(&out)
}

var (
	durationType  = reflect.TypeFor[time.Duration]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
)

// durations returns v, decoded JSON of type t, with every value where t
// has a time.Duration turned from nanoseconds into a Go duration string
// (toString), or back.
func durations(t reflect.Type, v any, toString bool) (any, error) {
	if t == durationType {
		if toString {
			n, err := v.(json.Number).Int64()
			return time.Duration(n).String(), err
		}
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("want a Go duration string, got %v", v)
		}
		d, err := time.ParseDuration(s)
		return json.Number(strconv.FormatInt(int64(d), 10)), err
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		return v, nil
	}
	var err error
	switch t.Kind() {
	case reflect.Pointer:
		return durations(t.Elem(), v, toString)
	case reflect.Struct:
		m, _ := v.(map[string]any)
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if x, ok := m[cmp.Or(name, f.Name)]; ok && x != nil {
				if m[cmp.Or(name, f.Name)], err = durations(f.Type, x, toString); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
			}
		}
	case reflect.Slice, reflect.Array:
		a, _ := v.([]any)
		for i := range a {
			if a[i], err = durations(t.Elem(), a[i], toString); err != nil {
				return nil, err
			}
		}
	case reflect.Map:
		m, _ := v.(map[string]any)
		for k := range m {
			if m[k], err = durations(t.Elem(), m[k], toString); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}
