package attack

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/netwheel/netwheel/netserver/frame"
)

// This file holds what a raw connection's answers are: how the stream the
// server sends back is cut into answers, whatever its segmentation. None
// of it touches a socket.

// AnswerKind says how a raw server's answers are read.
type AnswerKind uint8

// Answer kinds.
const (
	// AnswerEcho is the payload sent back as it is: each message's
	// answer is its len(Payload) bytes (the server's bytes are counted,
	// not compared).
	AnswerEcho AnswerKind = iota
	// AnswerLine is a line that begins with Expect.Prefix and ends with
	// the first '\n' at or after the prefix's end; a prefix that ends with
	// '\n' is the whole answer. A line that does not begin with the prefix
	// counts as a wrong answer (Expect's parser resynchronises on its end).
	AnswerLine
	// AnswerHTTP is an HTTP/1.x response: its header, up to the empty
	// line, must begin with Expect.Prefix ("HTTP/1." by default), and its
	// body is Content-Length bytes, or chunked, or none (a body delimited
	// by the close is not supported: its bytes would read as wrong
	// answers).
	AnswerHTTP
	// AnswerAny is any bytes: whatever arrives answers every message sent
	// before it. Answers cannot be told apart, so scenarios that count
	// them one by one (echo, splitter) do not apply.
	AnswerAny
	// AnswerNone is a server that answers nothing: a message is taken as
	// delivered once written.
	AnswerNone
)

// Expect is what an answer to each message must be.
type Expect struct {
	Kind   AnswerKind
	Prefix []byte // AnswerLine, AnswerHTTP: what an answer begins with
}

// ParseExpect parses -expect: "" or "echo" (the payload echoed), "any",
// "none", or the bytes an answer begins with, Go escapes allowed (\r\n):
// a prefix beginning with "HTTP/" reads HTTP responses, any other one a
// line.
func ParseExpect(s string) (Expect, error) {
	switch s {
	case "", "echo":
		return Expect{Kind: AnswerEcho}, nil
	case "any":
		return Expect{Kind: AnswerAny}, nil
	case "none":
		return Expect{Kind: AnswerNone}, nil
	}
	b, err := Unescape(s)
	if err != nil {
		return Expect{}, err
	}
	if bytes.HasPrefix(b, []byte("HTTP/")) {
		return Expect{Kind: AnswerHTTP, Prefix: b}, nil
	}
	return Expect{Kind: AnswerLine, Prefix: b}, nil
}

// String describes e as -expect takes it (a prefix Go-quoted), but for a
// line of any content (an empty prefix), "any line".
func (e Expect) String() string {
	switch e.Kind {
	case AnswerAny:
		return "any"
	case AnswerNone:
		return "none"
	case AnswerLine, AnswerHTTP:
		if len(e.Prefix) == 0 {
			return "any line"
		}
		return strconv.Quote(string(e.Prefix))
	}
	return "echo"
}

// presets are -preset's protocols: each message, and what its answer must
// be (ParseExpect's syntax). http's Host is the server's address.
var presets = map[string]struct{ payload, expect string }{
	"redis":     {payload: `PING\r\n`, expect: `+PONG\r\n`},
	"memcached": {payload: `version\r\n`, expect: `VERSION `},
	"http":      {payload: `GET / HTTP/1.1\r\nHost: %s\r\nUser-Agent: netwheel-loadtest\r\n\r\n`, expect: `HTTP/1.`},
	"line":      {payload: `ping\n`},
}

// ParseExchange returns a raw protocol's message and the answer it
// expects, from -preset, -payload and -expect (nil: not given; a flag
// given overrides its half of the preset). addr is the server's address
// ("": the embedded server, which only echoes). The message is nil when
// neither -preset nor -payload gives one: Size bytes of a letter pattern.
func ParseExchange(preset, payload, expect *string, addr string) (msg []byte, e Expect, err error) {
	line := false // -preset line without -expect: any line
	if preset != nil {
		pr, ok := presets[*preset]
		if !ok {
			return nil, e, fmt.Errorf("-preset %q: want redis, memcached, http or line", *preset)
		}
		if *preset == "http" {
			pr.payload = fmt.Sprintf(pr.payload, addr)
		}
		line = *preset == "line" && expect == nil
		payload, expect = cmp.Or(payload, &pr.payload), cmp.Or(expect, &pr.expect)
	}
	if expect != nil {
		if e, err = ParseExpect(*expect); err != nil {
			return nil, e, fmt.Errorf("-expect: %v", err)
		}
	}
	if line {
		e = Expect{Kind: AnswerLine}
	}
	if e.Kind != AnswerEcho && addr == "" {
		return nil, e, errors.New("-expect and -preset describe an external server's protocol and need -addr (the embedded servers echo)")
	}
	if payload == nil {
		return nil, e, nil
	}
	if msg, err = Unescape(*payload); err != nil {
		return nil, e, fmt.Errorf("-payload: %v", err)
	}
	if len(msg) == 0 || len(msg) > frame.DefaultMax-9 {
		return nil, e, fmt.Errorf("-payload: want 1 to %d bytes, got %d", frame.DefaultMax-9, len(msg))
	}
	return msg, e, nil
}

// Counted reports whether answers can be told apart and counted one per
// message: not for AnswerAny or AnswerNone.
func (e Expect) Counted() bool { return e.Kind != AnswerAny && e.Kind != AnswerNone }

// Unescape returns the bytes of s with Go's escapes interpreted, as in a
// double-quoted Go string literal: \r, \n, \t, \\, \", \xHH, \uHHHH. A double
// quote must be escaped.
func Unescape(s string) ([]byte, error) {
	u, err := strconv.Unquote(`"` + s + `"`)
	if err != nil {
		return nil, fmt.Errorf("attack: %q: not a string with Go escapes (write a double quote as \\\")", s)
	}
	return []byte(u), nil
}

// answers cuts a raw stream into answers. feed is called with the stream's
// bytes in order, in pieces of any size; it returns how many answers were
// completed by b and how many of them were wrong. Used by one goroutine
// (the reader).
type answers interface {
	feed(b []byte) (done, wrong int)
}

// newAnswers returns the parser of e's answers to messages of size bytes
// (AnswerEcho). AnswerAny and AnswerNone have none: the reader handles
// them.
func newAnswers(e Expect, size int) answers {
	switch e.Kind {
	case AnswerLine:
		return &lineAnswers{prefix: e.Prefix}
	case AnswerHTTP:
		return &httpAnswers{prefix: e.Prefix}
	}
	return &echoAnswers{size: uint64(max(size, 1))}
}

// echoAnswers counts bytes: every size of them is an answer.
type echoAnswers struct {
	size, bytes uint64
}

func (a *echoAnswers) feed(b []byte) (done, wrong int) {
	before := a.bytes / a.size
	a.bytes += uint64(len(b))
	return int(a.bytes/a.size - before), 0
}

// lineAnswers reads lines that must begin with prefix.
type lineAnswers struct {
	prefix []byte
	off    int  // bytes of the current answer seen
	bad    bool // the current answer did not begin with prefix
}

func (a *lineAnswers) feed(b []byte) (done, wrong int) {
	for len(b) > 0 {
		if a.off < len(a.prefix) {
			n := min(len(b), len(a.prefix)-a.off)
			if !bytes.Equal(b[:n], a.prefix[a.off:a.off+n]) {
				a.bad = true
			}
			// A wrong line ends at its own '\n', which may be in the
			// part compared with the prefix.
			if a.bad {
				if i := bytes.IndexByte(b[:n], '\n'); i >= 0 {
					b = b[i+1:]
					a.off, a.bad = 0, false
					done++
					wrong++
					continue
				}
			}
			b, a.off = b[n:], a.off+n
			if a.off == len(a.prefix) && !a.bad && len(a.prefix) > 0 && a.prefix[len(a.prefix)-1] == '\n' {
				a.off = 0
				done++
			}
			continue
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			a.off += len(b)
			return done, wrong
		}
		b = b[i+1:]
		done++
		if a.bad {
			wrong++
		}
		a.off, a.bad = 0, false
	}
	return done, wrong
}

// httpAnswers reads HTTP/1.x responses: a header beginning with prefix, up
// to an empty line, then a body of Content-Length bytes, or chunked
// (Transfer-Encoding: chunked: chunks, the last of size 0, and trailer
// lines up to an empty one), or none.
type httpAnswers struct {
	prefix []byte
	state  httpState
	head   []byte // stHead: the header so far; stChunkSize, stTrailer: the line so far (both bounded)
	body   int64  // stBody, stChunkData: bytes still to skip
	bad    bool   // the current response is wrong
}

type httpState uint8

const (
	stHead      httpState = iota // reading the header
	stBody                       // skipping a Content-Length body
	stChunkSize                  // reading a chunk-size line
	stChunkData                  // skipping a chunk's data and its CRLF
	stTrailer                    // reading trailer lines after the last chunk
)

// maxHTTPHeader bounds a response header (or a chunk-size or trailer
// line) held to find its end; a longer one counts as a wrong answer, and
// the parser starts over on the next bytes.
const maxHTTPHeader = 64 << 10

func (a *httpAnswers) feed(b []byte) (done, wrong int) {
	for len(b) > 0 {
		switch a.state {
		case stBody, stChunkData:
			n := int(min(int64(len(b)), a.body))
			b, a.body = b[n:], a.body-int64(n)
			if a.body > 0 {
				continue
			}
			if a.state == stBody {
				done, wrong = a.end(done, wrong)
			} else {
				a.state = stChunkSize
			}
			continue
		}
		// A header, or a line: up to its end.
		sep := []byte("\r\n")
		if a.state == stHead {
			sep = []byte("\r\n\r\n")
		}
		start := max(len(a.head)-len(sep)+1, 0)
		a.head = append(a.head, b...)
		i := bytes.Index(a.head[start:], sep)
		if i < 0 {
			if len(a.head) > maxHTTPHeader {
				a.head, a.state, a.bad = a.head[:0], stHead, false
				done++
				wrong++
			}
			return done, wrong
		}
		end := start + i + len(sep)
		b = b[len(b)-(len(a.head)-end):] // the bytes past it
		text := a.head[:end-len(sep)]
		a.head = a.head[:0]
		switch a.state {
		case stHead:
			if !bytes.HasPrefix(text, a.prefix) {
				a.bad = true
			}
			switch a.body = contentLength(text); {
			case chunked(text):
				a.state = stChunkSize
			case a.body > 0:
				a.state = stBody
			default:
				done, wrong = a.end(done, wrong)
			}
		case stChunkSize:
			hex, _, _ := bytes.Cut(text, []byte(";"))
			n, err := strconv.ParseInt(string(bytes.TrimSpace(hex)), 16, 64)
			switch {
			case err != nil || n < 0:
				a.bad, a.state = true, stTrailer // cannot follow it: wrong, and on to the next empty line
			case n == 0:
				a.state = stTrailer
			default:
				a.state, a.body = stChunkData, n+2 // and its CRLF
			}
		case stTrailer:
			if len(text) == 0 {
				done, wrong = a.end(done, wrong)
			}
		}
	}
	return done, wrong
}

// end counts the response just read and starts the next one.
func (a *httpAnswers) end(done, wrong int) (int, int) {
	if a.bad {
		wrong++
	}
	a.bad, a.state = false, stHead
	return done + 1, wrong
}

// contentLength returns the Content-Length of a response header, 0 if it
// has none or it is not a number.
func contentLength(head []byte) int64 {
	v := headerValue(head, "Content-Length")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// chunked reports whether a response header says its body is chunked.
func chunked(head []byte) bool {
	return strings.Contains(strings.ToLower(headerValue(head, "Transfer-Encoding")), "chunked")
}

// headerValue returns the value of the first header field name of a
// response header, trimmed, or "".
func headerValue(head []byte, name string) string {
	for _, line := range bytes.Split(head, []byte("\r\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && strings.EqualFold(string(bytes.TrimSpace(k)), name) {
			return string(bytes.TrimSpace(v))
		}
	}
	return ""
}
