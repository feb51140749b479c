//go:build !unix

package safetensors

import "io"

// mapFile reads the whole file where mmap is not available through package syscall.
func mapFile(path string) ([]byte, func() error, error) {
	fd, size, err := openSize(path)
	if err != nil {
		return nil, nil, err
	}
	defer fd.Close()
	b := make([]byte, size)
	if _, err := io.ReadFull(fd, b); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}
