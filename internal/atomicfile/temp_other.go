//go:build !linux

package atomicfile

// createTemp makes a hidden file beside the target: no unnamed files here.
func createTemp(dir, base string) (*temp, error) { return createNamed(dir, base) }

// name does nothing: a temp here is named from the start.
func (t *temp) name() error { return nil }
