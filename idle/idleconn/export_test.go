package idleconn

import (
	"reflect"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/netwheel/netwheel/wheel"
)

// The state these report is the idle.Tracker's, whose export_test.go this
// package's tests cannot see: they read its unexported fields by name, and
// panic if one is renamed.

// field returns v's field name, readable; v is an addressable struct.
func field(v reflect.Value, name string) reflect.Value {
	f := v.FieldByName(name)
	if !f.IsValid() {
		panic("idleconn test: no field " + name + " in " + v.Type().String())
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

func atomicField(v reflect.Value, name string) int64 {
	return field(v, name).Addr().Interface().(*atomic.Int64).Load()
}

func (c *Conn) tracker() reflect.Value { return reflect.ValueOf(&c.t).Elem() }

// LastActivity reports the wheel time of the last activity.
func (c *Conn) LastActivity() time.Duration {
	return time.Duration(atomicField(c.tracker(), "lastAct"))
}

// LastIn reports the wheel time of the last inbound byte.
func (c *Conn) LastIn() time.Duration { return time.Duration(atomicField(c.tracker(), "lastIn")) }

// HandshakePending reports whether a handshake deadline is running.
func (c *Conn) HandshakePending() bool { return atomicField(c.tracker(), "handshakeAt") != 0 }

// WriteArmed reports whether a write-stall deadline is running.
func (c *Conn) WriteArmed() bool {
	w := field(c.tracker(), "write")
	return !w.IsNil() && atomicField(w.Elem(), "at") != 0
}

// WriteTimerArmed reports whether a write-stall deadline is running and its
// timer is on the wheel (see idle's export_test.go).
func (c *Conn) WriteTimerArmed() bool {
	return c.WriteArmed() &&
		field(field(c.tracker(), "write").Elem(), "timer").Addr().Interface().(*wheel.Timer).Pending()
}
