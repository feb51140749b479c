//go:build !unix

package regular

import "os"

// openNoBlock stats path before opening it where O_NONBLOCK is not available, so that a named
// pipe is refused before the open that would wait for a writer.
func openNoBlock(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := Check(fi); err != nil {
		return nil, err
	}
	return os.Open(path)
}
