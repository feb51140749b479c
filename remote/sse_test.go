package remote

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

type ev struct {
	Type, Data string
}

// readAll reads every event, returning the events, comment count and the final error (nil at
// a clean EOF).
func readAll(r io.Reader, bufSize, maxLine int) ([]ev, int, error) {
	s := newSSEReader(r, bufSize, maxLine)
	var out []ev
	for {
		e, err := s.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return out, s.Comments, err
		}
		out = append(out, ev{e.Type, string(e.Data)})
	}
}

func TestSSE(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		want     []ev
		comments int
	}{
		{"lf", "data: a\n\ndata: b\n\n", []ev{{"", "a"}, {"", "b"}}, 0},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []ev{{"", "a"}, {"", "b"}}, 0},
		{"lone cr", "data: a\r\rdata: b\r\r", []ev{{"", "a"}, {"", "b"}}, 0},
		{"mixed ends", "data: a\r\n\ndata: b\n\r\n", []ev{{"", "a"}, {"", "b"}}, 0},
		{"multi-line data", "data: a\ndata: b\ndata:\n\n", []ev{{"", "a\nb\n"}}, 0},
		{"no space after colon", "data:{\"x\":1}\n\n", []ev{{"", `{"x":1}`}}, 0},
		{"only one space is stripped", "data:  two\n\n", []ev{{"", " two"}}, 0},
		{"field without colon", "data\n\n", []ev{{"", ""}}, 0},
		{"event type", "event: error\ndata: boom\n\ndata: ok\n\n", []ev{{"error", "boom"}, {"", "ok"}}, 0},
		{"error field (llama.cpp)", "error: {\"message\":\"m\"}\n\ndata: [DONE]\n\n", []ev{{"error", `{"message":"m"}`}, {"", "[DONE]"}}, 0},
		{"event type without data is dropped", "event: x\n\ndata: y\n\n", []ev{{"", "y"}}, 0},
		{"comments", ":\n\n: ping\ndata: a\n\n:keep-alive\n\n", []ev{{"", "a"}}, 3},
		{"ignored fields", "id: 1\nretry: 10\nfoo: bar\ndata: a\n\n", []ev{{"", "a"}}, 0},
		{"blank lines only", "\n\n\r\n\r\r", nil, 0},
		{"eof without blank line", "data: [DONE]\n", []ev{{"", "[DONE]"}}, 0},
		{"eof mid line", "data: [DONE]", []ev{{"", "[DONE]"}}, 0},
		{"eof after cr", "data: a\r", []ev{{"", "a"}}, 0},
		{"empty", "", nil, 0},
		{"byte-order mark", "\uFEFFdata: a\n\ndata: b\n\n", []ev{{"", "a"}, {"", "b"}}, 0},
		{"a mark past the first line is data", "data: a\n\n\uFEFFdata: b\n\n", []ev{{"", "a"}}, 0},
	}
	for _, tt := range tests {
		for _, bufSize := range []int{16, 4096} {
			got, comments, err := readAll(iotest.OneByteReader(strings.NewReader(tt.in)), bufSize, 1024)
			if err != nil || !reflect.DeepEqual(got, tt.want) || comments != tt.comments {
				t.Errorf("%s (buffer %d): %q, %d comments, %v; want %q, %d", tt.name, bufSize, got, comments, err, tt.want, tt.comments)
			}
		}
	}
}

// TestSSELimits: a line or event longer than the limit is an error wrapping ErrMalformed,
// whether the line fits the read buffer or not, and one at the limit is not.
func TestSSELimits(t *testing.T) {
	const limit = 100
	line := func(n int) string { return "data: " + strings.Repeat("x", n-len("data: ")) }
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"line at the limit", line(limit) + "\n\n", true},
		{"line over the limit", line(limit+1) + "\n\n", false},
		{"crlf line at the limit", line(limit) + "\r\n\r\n", true},
		{"unterminated line over the limit", line(limit + 1), false},
		{"event data over the limit", line(60) + "\n" + line(60) + "\n\n", false},
		{"huge line", line(1<<20) + "\n\n", false},
	}
	for _, tt := range tests {
		for _, bufSize := range []int{16, 64, 1 << 16} {
			_, _, err := readAll(strings.NewReader(tt.in), bufSize, limit)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrMalformed)) {
				t.Errorf("%s (buffer %d): %v", tt.name, bufSize, err)
			}
		}
	}
}

// TestSSEReadError: a read error other than EOF comes out as itself, and the event it cut
// short is not dispatched.
func TestSSEReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom))
	got, _, err := readAll(r, 16, 1024)
	if !errors.Is(err, boom) || !reflect.DeepEqual(got, []ev{{"", "a"}}) {
		t.Fatalf("%q, %v", got, err)
	}
}

// refEvents is a reference parser over the whole input: split into lines at CRLF, CR or LF,
// then apply the fields. It has no limits and no buffer.
func refEvents(in []byte) ([]ev, int) {
	var out []ev
	var data []string
	typ, comments, has := "", 0, false
	apply := func(line string) {
		switch {
		case line == "":
			if has {
				out = append(out, ev{typ, strings.Join(data, "\n")})
			}
			data, typ, has = nil, "", false
		case line[0] == ':':
			comments++
		default:
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch name {
			case "data":
				data, has = append(data, value), true
			case "event":
				typ = value
			}
		}
	}
	s := string(in)
	for s != "" {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			apply(s)
			break
		}
		apply(s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	if has {
		out = append(out, ev{typ, strings.Join(data, "\n")})
	}
	return out, comments
}

// FuzzSSE: the reader agrees with the reference parser whatever the buffer size and however
// the input is cut into reads, or fails with ErrMalformed on a line over the limit.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: a\n\ndata: b\n\n", "data: a\r\n\r\n", "data: a\r\rdata:b", ":\n\nevent: e\ndata: x\ndata: y\n\n",
		"data: {\"choices\":[]}\n\ndata: [DONE]\n\n", "\r\n\r\n\r", "data: " + strings.Repeat("z", 70) + "\r\n",
	} {
		f.Add([]byte(s))
	}
	const limit = 64
	f.Fuzz(func(t *testing.T, in []byte) {
		want, wantComments := refEvents(in)
		long := false
		for _, l := range bytes.FieldsFunc(in, func(r rune) bool { return r == '\r' || r == '\n' }) {
			long = long || len(l) > limit
		}
		for _, e := range want {
			long = long || len(e.Data) > limit
		}
		for _, bufSize := range []int{16, 17, 4096} {
			got, comments, err := readAll(iotest.HalfReader(bytes.NewReader(in)), bufSize, limit)
			if long {
				if err != nil && !errors.Is(err, ErrMalformed) {
					t.Fatalf("buffer %d: error %v", bufSize, err)
				}
				continue
			}
			if err != nil || !reflect.DeepEqual(got, want) || comments != wantComments {
				t.Fatalf("buffer %d: %q %d %v; reference %q %d", bufSize, got, comments, err, want, wantComments)
			}
		}
	})
}

// FuzzStream: any response body yields a Result with a known reason and bounded contents,
// never a panic.
func FuzzStream(f *testing.F) {
	for _, fm := range formats {
		f.Add([]byte(fm.stream), fm.api == Chat)
	}
	f.Add([]byte("data: {\"choices\":[{\"token_ids\":[1,2],\"text\":\"x\"}],\"usage\":{\"completion_tokens\":-5}}\n\n"), false)
	f.Add([]byte("data: {\"error\":\"x\"}\n\n"), true)
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		c, err := New(Config{BaseURL: "http://h", MaxLineBytes: 4096, ReadBufferBytes: 64, Tokenizer: byteTokenizer{}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var res Result
		const maxTokens = 4
		sr := newStreamReader(c, bytes.NewReader(body), &res, maxTokens, nil)
		fail, readErr := sr.run()
		if readErr != nil {
			fail = c.classify(t.Context(), t.Context(), readErr, reachedAnswer)
		}
		sr.finish(c.cfg.Tokenizer)
		if fail != nil && (fail.Reason == ReasonNone || fail.Reason.String() == "" || len(fail.Detail) > maxDetail+3) {
			t.Fatalf("failure %+v", fail)
		}
		if len(res.Chunks) > 2*maxTokens+slackChunks || len(res.Text) > maxTokens*maxTokenBytes+slackText {
			t.Fatalf("%d chunks, %d text bytes", len(res.Chunks), len(res.Text))
		}
		if res.Tokens == TokensUnknown && res.OutputTokens != -1 {
			t.Fatalf("unknown token source with %d tokens", res.OutputTokens)
		}
	})
}
