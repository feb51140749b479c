// Package sticky keeps the first error of a stream of writes, so that a long output to a closed
// or full stdout is reported once at the end instead of lost silently.
package sticky

import "io"

// Writer writes to W until a write fails; Err is that first error, and every later write
// returns it without writing.
type Writer struct {
	W   io.Writer
	Err error
}

func (s *Writer) Write(p []byte) (int, error) {
	if s.Err != nil {
		return 0, s.Err
	}
	n, err := s.W.Write(p)
	s.Err = err
	return n, err
}
