package remote

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// rosetopMetrics registers the names rosetop serve exposes (vLLM's after the rosetop_ prefix)
// in a client_golang registry, labelled by model as vLLM labels them.
type rosetopMetrics struct {
	reg         *prometheus.Registry
	running     *prometheus.GaugeVec
	kv          prometheus.Gauge
	generation  prometheus.Counter
	ttft        prometheus.Observer
	ttftOther   prometheus.Observer
	unusedQueue *prometheus.HistogramVec
}

func newRosetopMetrics() *rosetopMetrics {
	m := &rosetopMetrics{reg: prometheus.NewRegistry()}
	m.running = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rosetop_num_requests_running", Help: "Requests running."}, []string{"model_name"})
	kv := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rosetop_kv_cache_usage_perc", Help: "KV cache usage."}, []string{"model_name"})
	gen := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rosetop_generation_tokens_total", Help: "Tokens generated."}, []string{"model_name"})
	ttft := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "rosetop_time_to_first_token_seconds", Help: "TTFT.",
		Buckets: []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10},
	}, []string{"model_name"})
	m.unusedQueue = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rosetop_request_queue_time_seconds", Help: "Queue."}, []string{"model_name"})
	m.reg.MustRegister(m.running, kv, gen, ttft, m.unusedQueue)
	m.unusedQueue.WithLabelValues("gpt2") // a series with no observations yet
	m.kv, m.generation = kv.WithLabelValues("gpt2"), gen.WithLabelValues("gpt2")
	m.ttft, m.ttftOther = ttft.WithLabelValues("gpt2"), ttft.WithLabelValues("gpt2-medium")
	return m
}

func observe(o prometheus.Observer, v float64, n int) {
	for range n {
		o.Observe(v)
	}
}

// TestScrapeClientGolang scrapes real client_golang output over HTTP twice and reads the
// server-side TTFT percentiles of the window between the scrapes from the bucket deltas.
func TestScrapeClientGolang(t *testing.T) {
	m := newRosetopMetrics()
	srv := httptest.NewServer(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	clock := newFake(ms(500))
	s, err := NewScraper(ScraperConfig{URL: srv.URL + "/metrics", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	m.running.WithLabelValues("gpt2").Set(3)
	m.running.WithLabelValues("gpt2-medium").Set(4)
	m.kv.Set(0.25)
	m.generation.Add(1000)
	observe(m.ttft, 0.003, 6)
	observe(m.ttftOther, 0.003, 4)
	first, err := s.Scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if first.Kind != KindRosetop || first.At != ms(500) || first.Running != (Value{7, true}) || first.KVUsage != (Value{0.25, true}) ||
		first.GenerationTokens != (Value{1000, true}) || first.Waiting.Known || first.Preemptions.Known {
		t.Fatalf("first scrape %+v", first)
	}
	// An exposed histogram with no observations is known and empty; one with no series is not.
	if !first.Queue.Known || first.Queue.Count != 0 || !first.TTFT.Known || first.TTFT.Count != 10 || first.E2E.Known {
		t.Fatalf("queue %+v, TTFT %+v, E2E %+v", first.Queue, first.TTFT, first.E2E)
	}

	observe(m.ttft, 0.015, 2)
	observe(m.ttftOther, 0.015, 2)
	observe(m.ttft, 0.03, 4)
	clock.set(ms(1000))
	second, err := s.Scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	window := second.TTFT.Sub(first.TTFT)
	if window.Count != 8 || math.Abs(window.Sum-(4*0.015+4*0.03)) > 1e-9 {
		t.Fatalf("window %+v", window)
	}
	// Window: 4 in (0.01, 0.02], 4 in (0.02, 0.04].
	for _, c := range []struct{ q, want float64 }{{0.5, 0.02}, {0.75, 0.03}, {1, 0.04}} {
		if got, ok := window.Quantile(c.q); !ok || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("window p%v = %v %v, want %v", c.q*100, got, ok, c.want)
		}
	}
	// Since start the ten early 3 ms requests dominate: rank 9 of 18 is in (0.001, 0.005].
	if got, ok := second.TTFT.Quantile(0.5); !ok || math.Abs(got-(0.001+0.004*0.9)) > 1e-12 {
		t.Errorf("lifetime median %v %v", got, ok)
	}
}

func TestScrapeFailures(t *testing.T) {
	page := "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n"
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			w.Write([]byte(page))
		case "/big":
			w.Write([]byte(strings.Repeat("# padding\n", 100)))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/metrics"
	ln.Close()
	tests := []struct {
		name string
		cfg  ScraperConfig
		err  error
	}{
		{"ok", ScraperConfig{URL: srv.URL + "/metrics"}, nil},
		{"not found", ScraperConfig{URL: srv.URL + "/nope"}, ErrStatus},
		{"page too big", ScraperConfig{URL: srv.URL + "/big", MaxBytes: 100}, ErrMalformed},
		{"deadline", ScraperConfig{URL: srv.URL + "/slow", Timeout: 50 * time.Millisecond}, ErrTimeout},
		{"refused", ScraperConfig{URL: refused}, ErrConnect},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewScraper(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			snap, err := s.Scrape(context.Background())
			if !errors.Is(err, tt.err) || (err == nil && snap.Kind != KindVLLM) {
				t.Fatalf("Scrape: %v (kind %v), want %v", err, snap.Kind, tt.err)
			}
		})
	}
	for _, u := range []string{"", "metrics", "ftp://h/metrics", "http://u:p@h/metrics"} {
		if _, err := NewScraper(ScraperConfig{URL: u}); !errors.Is(err, ErrConfig) {
			t.Errorf("NewScraper(%q): %v", u, err)
		}
	}
}

func TestDefaultMetricsURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://h:8000/v1":     "http://h:8000/metrics",
		"http://h:8000":        "http://h:8000/metrics",
		"https://h/openai/v1/": "https://h/metrics",
	} {
		if got, err := DefaultMetricsURL(in); err != nil || got != want {
			t.Errorf("DefaultMetricsURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := DefaultMetricsURL("nope"); !errors.Is(err, ErrConfig) {
		t.Errorf("bad URL: %v", err)
	}
}

// TestScrapeErrorBody: a refused scrape says the message of the server's error object, as a
// refused request does, not the JSON around it.
func TestScrapeErrorBody(t *testing.T) {
	tests := []struct {
		name, source string
		status       int
		body, detail string
	}{
		{"llama.cpp without --metrics", "tools/server/server-context.cpp (metrics: ERROR_TYPE_NOT_SUPPORTED through format_error_response)", 501,
			`{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with ` + "`--metrics`" + `","type":"not_supported_error"}}`,
			"This server does not support metrics endpoint. Start it with `--metrics`"},
		{"llama.cpp api key", "tools/server/README.md (API errors: the 401 of a wrong --api-key)", 401,
			`{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}`, "Invalid API Key"},
		{"fastapi", "a FastAPI server without the route", 404, `{"detail":"Not Found"}`, "Not Found"},
		{"plain text", "Ollama (gin's default answer to a path it does not route)", 404, "404 page not found", "404 page not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			s, err := NewScraper(ScraperConfig{URL: srv.URL + "/metrics"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			_, err = s.Scrape(context.Background())
			var f *Failure
			if !errors.As(err, &f) || f.Reason != ReasonStatus || f.Status != tt.status {
				t.Fatalf("Scrape: %v, want an http %d failure (%s)", err, tt.status, tt.source)
			}
			if f.Detail != tt.detail {
				t.Errorf("detail %q, want %q (%s)", f.Detail, tt.detail, tt.source)
			}
		})
	}
}
