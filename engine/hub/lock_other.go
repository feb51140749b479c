//go:build !unix

package hub

import "context"

// lockFile does not lock where flock is unavailable: concurrent downloads of one file there
// may fail (never place a partial file, which is checked before it is moved into place).
func lockFile(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	return func() {}, ctx.Err()
}
