package serve

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkStream measures the serving path alone: 64 concurrent streaming completions of 256
// tokens (decode-heavy's shape) through real HTTP, the real scheduler and a scripted model that
// costs nothing, client included. It reports wall time and allocations per streamed token.
func BenchmarkStream(b *testing.B) {
	const clients, tokens = 64, 256
	h := newHarness(b, engineOpts{maxBatch: clients, maxSeqLen: 512, script: func(int) int32 { return 383 }}, Options{})
	body := func(i int) string {
		return fmt.Sprintf(`{"prompt": [%d, 15496], "max_tokens": %d, "ignore_eos": true, "stream": true}`, 1000+i, tokens)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		var wg sync.WaitGroup
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := h.client.Post(h.url+"/v1/completions", "application/json", strings.NewReader(body(i)))
				if err != nil {
					b.Error(err)
					return
				}
				defer resp.Body.Close()
				n := 0
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "data: {") {
						n++
					}
				}
				if n != tokens+1 || resp.StatusCode != http.StatusOK {
					b.Errorf("%d chunks, status %d", n, resp.StatusCode)
				}
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	streamed := float64(b.N * clients * tokens)
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/streamed, "ns/token")
	b.ReportMetric(streamed/time.Since(start).Seconds(), "tokens/s")
}
