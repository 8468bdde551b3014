package attack

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// feedSplit feeds stream to a into pieces cut at random byte boundaries
// (every cut the splitter uses: whole, a byte at a time, pieces of at most
// 2, 8 or 64 bytes) and returns the answers and wrong ones counted.
func feedSplit(a answers, stream []byte, rng *rand.Rand) (done, wrong int) {
	off := 0
	for _, k := range cuts(rng, len(stream)) {
		d, w := a.feed(stream[off : off+k])
		done, wrong, off = done+d, wrong+w, off+k
	}
	return done, wrong
}

// Every answer kind is cut out of the stream the same way whatever its
// segmentation: answers split across reads, several in one read.
func TestAnswers_AnySegmentation(t *testing.T) {
	httpOK := "HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: keep-alive\r\n\r\nhello\r\n\r\nxyz"
	httpChunked := "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n5\r\nhello\r\nC;ext=1\r\n\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n"
	tests := []struct {
		name      string
		expect    string
		size      int
		stream    string
		wantDone  int
		wantWrong int
	}{
		{name: "echo", expect: "", size: 5, stream: strings.Repeat("abcde", 7), wantDone: 7},
		{name: "echo partial last", expect: "", size: 5, stream: strings.Repeat("abcde", 3) + "ab", wantDone: 3},
		{name: "redis pong", expect: `+PONG\r\n`, stream: strings.Repeat("+PONG\r\n", 9), wantDone: 9},
		{name: "redis error", expect: `+PONG\r\n`, stream: "+PONG\r\n-ERR unknown command\r\n+PONG\r\n-E\r\n", wantDone: 4, wantWrong: 2},
		{name: "memcached version", expect: `VERSION `, stream: strings.Repeat("VERSION 1.6.18\r\n", 5) + "ERROR\r\n", wantDone: 6, wantWrong: 1},
		{name: "any line", expect: ``, stream: "a\nbb\n\nccc\n", wantDone: 4},
		{name: "http content-length", expect: `HTTP/1.`, stream: strings.Repeat(httpOK, 4), wantDone: 4},
		{name: "http no body", expect: `HTTP/1.`, stream: "HTTP/1.1 204 No Content\r\n\r\nHTTP/1.0 200 OK\r\ncontent-length:  3\r\n\r\nabc", wantDone: 2},
		{name: "http wrong", expect: `HTTP/1.`, stream: "SSH-2.0\r\n\r\n" + httpOK, wantDone: 2, wantWrong: 1},
		{name: "http chunked", expect: `HTTP/1.`, stream: strings.Repeat(httpChunked, 3) + httpOK, wantDone: 4},
		{name: "http bad chunk size", expect: `HTTP/1.`, stream: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n" + httpOK, wantDone: 2, wantWrong: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ParseExpect(tt.expect)
			require.NoError(t, err)
			if tt.expect == "" && tt.name == "any line" {
				e = Expect{Kind: AnswerLine}
			}
			for seed := range uint64(200) {
				rng := rand.New(rand.NewPCG(seed, 7))
				done, wrong := feedSplit(newAnswers(e, tt.size), []byte(tt.stream), rng)
				require.Equal(t, tt.wantDone, done, "answers, seed %d", seed)
				require.Equal(t, tt.wantWrong, wrong, "wrong answers, seed %d", seed)
			}
		})
	}
}

func TestParseExpect(t *testing.T) {
	tests := []struct {
		in     string
		kind   AnswerKind
		prefix string
	}{
		{in: "", kind: AnswerEcho},
		{in: "echo", kind: AnswerEcho},
		{in: "any", kind: AnswerAny},
		{in: "none", kind: AnswerNone},
		{in: `+PONG\r\n`, kind: AnswerLine, prefix: "+PONG\r\n"},
		{in: `HTTP/1.`, kind: AnswerHTTP, prefix: "HTTP/1."},
		{in: `say \"hi\"\x00`, kind: AnswerLine, prefix: "say \"hi\"\x00"},
	}
	for _, tt := range tests {
		e, err := ParseExpect(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.kind, e.Kind, tt.in)
		assert.Equal(t, tt.prefix, string(e.Prefix), tt.in)
	}
	_, err := ParseExpect(`bad \q escape`)
	assert.Error(t, err)
	_, err = ParseExpect(`bare " quote`)
	assert.Error(t, err)
}

func TestParseExchange(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name                    string
		preset, payload, expect *string
		embedded                bool
		wantPayload             string
		wantKind                AnswerKind
		wantPrefix              string
		wantErr                 string
	}{
		{name: "redis", preset: str("redis"), wantPayload: "PING\r\n", wantKind: AnswerLine, wantPrefix: "+PONG\r\n"},
		{name: "memcached", preset: str("memcached"), wantPayload: "version\r\n", wantKind: AnswerLine, wantPrefix: "VERSION "},
		{name: "http", preset: str("http"), wantPayload: "GET / HTTP/1.1\r\nHost: 127.0.0.1:9\r\nUser-Agent: netwheel-loadtest\r\n\r\n",
			wantKind: AnswerHTTP, wantPrefix: "HTTP/1."},
		{name: "line", preset: str("line"), wantPayload: "ping\n", wantKind: AnswerLine},
		{name: "preset, expect given", preset: str("redis"), expect: str("any"), wantPayload: "PING\r\n", wantKind: AnswerAny},
		{name: "payload only: echoed", payload: str(`a\tb`), wantPayload: "a\tb", wantKind: AnswerEcho},
		{name: "payload only, embedded", payload: str(`a\tb`), embedded: true, wantPayload: "a\tb", wantKind: AnswerEcho},
		{name: "unknown preset", preset: str("smtp"), wantErr: "-preset"},
		{name: "expect embedded", expect: str("any"), embedded: true, wantErr: "need -addr"},
		{name: "preset embedded", preset: str("redis"), embedded: true, wantErr: "need -addr"},
		{name: "bad escape", payload: str(`a\q`), wantErr: "Go escapes"},
		{name: "empty payload", payload: str(""), wantErr: "-payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := "127.0.0.1:9"
			if tt.embedded {
				addr = ""
			}
			msg, e, err := ParseExchange(tt.preset, tt.payload, tt.expect, addr)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantPayload, string(msg))
			assert.Equal(t, tt.wantKind, e.Kind)
			assert.Equal(t, tt.wantPrefix, string(e.Prefix))
		})
	}
}
