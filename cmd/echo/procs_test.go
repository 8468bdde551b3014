package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProcsFor(t *testing.T) {
	tests := []struct {
		name  string
		procs int
		cores int
		env   string
		want  int
	}{
		{name: "unset, 2 cores", procs: 2, cores: 2, env: "", want: 3},
		{name: "unset, 1 core", procs: 1, cores: 1, env: "", want: 2},
		{name: "set", procs: 2, cores: 2, env: "2", want: 2},
		{name: "set to 1", procs: 1, cores: 2, env: "1", want: 1},
		{name: "set to 0, which the runtime ignores", procs: 2, cores: 2, env: "0", want: 3},
		{name: "not a number, which the runtime ignores", procs: 2, cores: 2, env: "many", want: 3},
		{name: "a 1-CPU quota on 64 cores, rounded up to 2", procs: 2, cores: 64, env: "", want: 2},
		{name: "a 2.5-CPU quota on 8 cores", procs: 3, cores: 8, env: "", want: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, procsFor(tc.procs, tc.cores, tc.env))
		})
	}
}

// asEchoEnv, set in a child's environment, makes the test binary run as
// the echo command (TestMain calls main).
const asEchoEnv = "NETWHEEL_TEST_AS_ECHO"

// defaultProcs returns the GOMAXPROCS the runtime picks by default here,
// the GOMAXPROCS variable aside.
func defaultProcs() int {
	old := runtime.GOMAXPROCS(0)
	runtime.SetDefaultGOMAXPROCS()
	n := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(old)
	return n
}

// TestMain_Layout runs the command as a process of its own, as users do:
// with GOMAXPROCS unset it runs one event loop per core and GOMAXPROCS one
// above; with GOMAXPROCS set, GOMAXPROCS-1 loops under the operator's
// setting.
func TestMain_Layout(t *testing.T) {
	procs := defaultProcs()
	// One above the cores, unless a cgroup quota lowered the runtime's
	// default (TestProcsFor has those cases).
	raised := procsFor(procs, runtime.NumCPU(), "")
	tests := []struct {
		name           string
		gomaxprocs     string // "": unset
		wantLoops      int
		wantGOMAXPROCS int
	}{
		{name: "unset", wantLoops: raised - 1, wantGOMAXPROCS: raised},
		{name: "set to 3", gomaxprocs: "3", wantLoops: 2, wantGOMAXPROCS: 3},
		{name: "set to 1", gomaxprocs: "1", wantLoops: 1, wantGOMAXPROCS: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
			env = append(env, asEchoEnv+"=1")
			if tc.gomaxprocs != "" {
				env = append(env, "GOMAXPROCS="+tc.gomaxprocs)
			}
			cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-log-format", "json")
			cmd.Env = env
			stderr, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			exited := make(chan error, 1)
			lines := make(chan string, 64)
			waited := false
			t.Cleanup(func() { // whatever failed, the child does not outlive the test
				if !waited {
					_ = cmd.Process.Kill()
					for range lines { // let the reader reach Wait
					}
					<-exited
				}
			})
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
				exited <- cmd.Wait() // after the last read of stderr, as Wait requires
			}()
			var started map[string]any
			var logs strings.Builder
			timeout := time.After(20 * time.Second)
			for started == nil {
				select {
				case l, ok := <-lines:
					require.True(t, ok, "echo exited before serving; stderr:\n%s", &logs)
					logs.WriteString(l + "\n")
					started = logLine(t, l, "echo: serving")
				case <-timeout:
					t.Fatalf("no startup line; stderr:\n%s", &logs)
				}
			}
			go func() {
				for range lines { // drain, so that the child never blocks writing its log
				}
			}()
			assert.EqualValues(t, tc.wantLoops, started["event_loops"], "event_loops")
			assert.EqualValues(t, tc.wantGOMAXPROCS, started["gomaxprocs"], "gomaxprocs")

			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			select {
			case err := <-exited:
				waited = true
				assert.NoError(t, err, "exit status")
			case <-time.After(20 * time.Second):
				t.Fatal("echo did not exit after SIGTERM")
			}
		})
	}
}
