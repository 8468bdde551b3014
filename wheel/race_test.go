//go:build race

package wheel_test

// raceEnabled reports whether the race detector is on: it slows everything
// about tenfold, so wall-clock bounds are not checked under it.
const raceEnabled = true
