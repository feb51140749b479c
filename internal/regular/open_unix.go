//go:build unix

package regular

import (
	"os"
	"syscall"
)

// openNoBlock opens path with O_NONBLOCK, so that opening a named pipe with no writer returns at
// once (a blocking open would wait for a writer). Reads of regular files ignore the flag.
func openNoBlock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
