//go:build unix

package hub

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockPoll is how often lockFile tries again while another process holds the lock.
const lockPoll = 100 * time.Millisecond

// lockFile takes an exclusive advisory lock on path (made, with its directory, if absent),
// trying again while another process holds it until ctx is done; waiting, if not nil, is called
// once when it has to wait. The lock dies with the process, so a crashed download never leaves
// one held. unlock releases it.
func lockFile(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(lockPoll)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { fh.Close() }, nil // closing the descriptor releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			fh.Close()
			return nil, err
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
		select {
		case <-ctx.Done():
			fh.Close()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}
