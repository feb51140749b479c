package remote

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// errLineTooLong: an SSE line is longer than the reader's limit. It wraps ErrMalformed.
var errLineTooLong = fmt.Errorf("%w: SSE line too long", ErrMalformed)

// sseEvent is one dispatched server-sent event (the WHATWG event-stream framing: fields on
// lines, a blank line ends the event). Data aliases the reader's buffer: it is valid until the
// next call to next.
type sseEvent struct {
	Type string // the last `event:` field, "" when the event had none
	Data []byte // the `data:` fields joined with '\n'
}

// sseReader splits an event stream into events. It reads through a fixed buffer and never holds
// more than maxLine bytes of one line, nor more than maxLine bytes of one event's data: longer
// input is an error, not an allocation. Lines end with LF, CRLF or a lone CR.
type sseReader struct {
	r       io.Reader
	buf     []byte // read buffer; buf[start:end] is not yet consumed
	start   int
	end     int
	eof     error  // the error the underlying reader returned, once it did
	maxLine int    // longest line and longest event data accepted
	long    []byte // a line that did not fit in buf's free space, assembled here
	data    []byte // the current event's data when it spans several lines
	dataSet bool   // the current event has at least one data field
	single  []byte // the current event's data when aliased is set (it points into buf)
	aliased bool   // the current event's data is one field still in buf
	typ     string // the current event's type
	begun   bool   // the first line was read (and its byte-order mark, if any, dropped)
	// Comments counts `:` lines (keep-alives) seen so far, Events the events dispatched.
	Comments, Events int
}

// newSSEReader returns a reader over r with a read buffer of bufSize bytes and lines of at most
// maxLine bytes.
func newSSEReader(r io.Reader, bufSize, maxLine int) *sseReader {
	return &sseReader{r: r, buf: make([]byte, max(bufSize, minSSEBuffer)), maxLine: maxLine}
}

// minSSEBuffer keeps the buffer larger than a held-back CR.
const minSSEBuffer = 16

// next returns the next event. At the end of the input it returns io.EOF, after dispatching an
// event whose data was complete but not yet followed by a blank line (servers that end the
// stream with "data: [DONE]\n" alone are common). Other errors are the reader's, or an error
// wrapping ErrMalformed.
func (s *sseReader) next() (sseEvent, error) {
	for {
		line, err := s.line()
		if err != nil {
			if errors.Is(err, io.EOF) && s.dataSet {
				return s.dispatch(), nil
			}
			return sseEvent{}, err
		}
		if !s.begun { // the stream's one byte-order mark, which the event-stream format ignores
			s.begun, line = true, bytes.TrimPrefix(line, []byte("\uFEFF"))
		}
		if len(line) == 0 {
			if s.dataSet {
				return s.dispatch(), nil
			}
			s.typ = ""
			continue
		}
		if err := s.field(line); err != nil {
			return sseEvent{}, err
		}
	}
}

// field applies one non-blank line to the current event.
func (s *sseReader) field(line []byte) error {
	if line[0] == ':' {
		s.Comments++
		return nil
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		return s.addData(value)
	case "event":
		s.typ = string(value)
	case "error":
		// llama.cpp servers of 2024-2025 send a failure as an `error: {json}` line, then
		// [DONE]: it reads as an error event.
		s.typ = "error"
		return s.addData(value)
	}
	// id, retry and unknown fields carry nothing a completion stream needs.
	return nil
}

// addData appends one data field. A single field stays in place; a second one copies both out.
func (s *sseReader) addData(value []byte) error {
	if !s.dataSet {
		s.dataSet, s.single, s.aliased = true, value, true
		return nil
	}
	s.unalias()
	if len(s.data)+1+len(value) > s.maxLine {
		return fmt.Errorf("%w: event data over %d bytes", ErrMalformed, s.maxLine)
	}
	s.data = append(s.data, '\n')
	s.data = append(s.data, value...)
	return nil
}

// dispatch ends the current event.
func (s *sseReader) dispatch() sseEvent {
	ev := sseEvent{Type: s.typ, Data: s.data}
	if s.aliased {
		ev.Data = s.single
	}
	s.dataSet, s.aliased, s.single, s.typ = false, false, nil, ""
	s.Events++
	return ev
}

// unalias copies a data field that points into buf out of it.
func (s *sseReader) unalias() {
	if s.aliased {
		s.data = append(s.data[:0], s.single...)
		s.aliased, s.single = false, nil
	}
}

// line returns the next line without its terminator. It aliases buf (or long) until the next
// call. A line cut by the end of input is returned as a line; then io.EOF.
func (s *sseReader) line() ([]byte, error) {
	for {
		if i := indexEOL(s.buf[s.start:s.end]); i >= 0 {
			line := s.buf[s.start : s.start+i]
			s.consumeEOL(s.start + i)
			if s.long != nil {
				return s.joinLong(line)
			}
			if len(line) > s.maxLine {
				return nil, errLineTooLong
			}
			return line, nil
		}
		// A CR at the very end may be the first half of a CRLF: look at the next byte first.
		if err := s.fill(); err != nil {
			rest := s.buf[s.start:s.end]
			s.start = s.end
			if s.long != nil {
				line, lerr := s.joinLong(rest)
				if lerr != nil {
					return nil, lerr
				}
				return line, nil
			}
			if len(rest) > s.maxLine {
				return nil, errLineTooLong
			}
			if len(rest) > 0 {
				return rest, nil
			}
			return nil, err
		}
	}
}

// joinLong finishes a line that started in long.
func (s *sseReader) joinLong(tail []byte) ([]byte, error) {
	if len(s.long)+len(tail) > s.maxLine {
		return nil, errLineTooLong
	}
	line := append(s.long, tail...)
	s.long = nil
	return line, nil
}

// indexEOL is the index of the first CR or LF in b, -1 if none. A CR that ends b is not yet a
// line end (it may be followed by LF) unless more bytes cannot come; fill handles that case.
func indexEOL(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	limit := b
	if i >= 0 {
		limit = b[:i]
	}
	if j := bytes.IndexByte(limit, '\r'); j >= 0 {
		if j == len(b)-1 {
			return -1
		}
		return j
	}
	return i
}

// consumeEOL advances past the terminator at buf[i] (CR, LF or CRLF).
func (s *sseReader) consumeEOL(i int) {
	s.start = i + 1
	if s.buf[i] == '\r' && s.start < s.end && s.buf[s.start] == '\n' {
		s.start++
	}
}

// fill reads more input. When the buffer holds only part of a line, that part moves to long
// (bounded by maxLine) so the buffer can take the rest. It returns the reader's error once the
// input is exhausted.
func (s *sseReader) fill() error {
	s.unalias() // the buffer is about to move
	if s.eof != nil {
		// A trailing CR with nothing after it still ends a line.
		if s.end > s.start && s.buf[s.end-1] == '\r' {
			s.end--
			return s.eof
		}
		return s.eof
	}
	if s.start > 0 {
		n := copy(s.buf, s.buf[s.start:s.end])
		s.start, s.end = 0, n
	}
	if s.end == len(s.buf) {
		// Keep a lone trailing CR in the buffer: it may pair with the next LF.
		keep := 0
		if s.buf[s.end-1] == '\r' {
			keep = 1
		}
		if len(s.long)+s.end-keep > s.maxLine {
			return errLineTooLong
		}
		s.long = append(s.long, s.buf[:s.end-keep]...)
		copy(s.buf, s.buf[s.end-keep:s.end])
		s.end = keep
	}
	n, err := s.r.Read(s.buf[s.end:])
	s.end += n
	if err != nil {
		s.eof = err
		if n > 0 {
			return nil
		}
		return s.fill()
	}
	return nil
}
