//go:build !race

package record_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"rosetop/bench"
	"rosetop/record"
)

// hourViews is one hour of views at the dashboard's 10 Hz.
const hourViews = 36_000

// Replaying a one-hour recording stays under 100 MB resident: a child process (this test binary
// again) opens a synthetic hour, plays all of it at 16x through the dashboard, seeks back and
// forth, and reports its peak resident set (VmHWM). Not under -race, whose shadow memory would
// be what is measured.
func TestReplayHourMemory(t *testing.T) {
	if path := os.Getenv("ROSETOP_REPLAY_HOUR"); path != "" {
		replayHour(t, path)
		return
	}
	if testing.Short() {
		t.Skip("an hour of views takes a while to write")
	}
	path := filepath.Join(t.TempDir(), "hour.rec")
	if err := record.WriteSynth(path, hourViews, 7); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	cmd := exec.Command(os.Args[0], "-test.run=^TestReplayHourMemory$", "-test.v")
	cmd.Env = append(os.Environ(), "ROSETOP_REPLAY_HOUR="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the replaying process: %v\n%s", err, out)
	}
	var peak int
	for line := range strings.SplitSeq(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "peak-rss-kB "); ok {
			peak, _ = strconv.Atoi(v)
		}
	}
	t.Logf("a one-hour recording (%d views, %.1f MB): peak resident %.1f MB while replaying it", hourViews, float64(fi.Size())/1e6, float64(peak)/1024)
	if peak == 0 || peak > 100*1024 {
		t.Fatalf("peak resident %d kB, want under 100 MB\n%s", peak, out)
	}
}

// replayHour is the child: the replay of path through the real dashboard at 120x40, 16x, then
// seeks, then prints its peak resident set.
func replayHour(t *testing.T, path string) {
	rec, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Frames() != hourViews {
		t.Fatalf("%d views, want %d", rec.Frames(), hourViews)
	}
	wall := time.Unix(0, 0)
	rp, err := record.NewReplay(rec, record.ReplayOptions{Speed: 16, Now: func() time.Time { return wall }})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	d := newDashboard(t, rp, 120, 40)
	for v := rp.View(); !v.Replay.Paused; v = rp.View() { // the dashboard's ticks until the end
		wall = wall.Add(100 * time.Millisecond)
		d.frame()
	}
	for _, a := range []bench.Action{bench.ActReplayStart, bench.ActReplayNextEvent, bench.ActReplayEnd, bench.ActReplayBack, bench.ActReplayBack} {
		rp.Do(a)
		d.frame()
	}
	d.m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("w")})
	d.frame()
	fmt.Printf("peak-rss-kB %d\n", vmHWM(t))
}

// vmHWM is the process's peak resident set in kB (Linux).
func vmHWM(t *testing.T) int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status to read the peak resident set from")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}
