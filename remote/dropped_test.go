package remote

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDroppedRequest: a server that takes the request and then closes or resets the connection
// without a byte of answer dropped the request: a stream cut, which says so, not a connect
// failure (whose first-run hint sends the user to check --endpoint). A refused connection stays
// a connect failure (TestConnectRefused). It counts as a refusal: the client backs off.
func TestDroppedRequest(t *testing.T) {
	for _, reset := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			if reset {
				conn.(*net.TCPConn).SetLinger(0) // close with a RST
			}
			conn.Close()
		}))
		c := newTestClient(t, srv.URL, Config{})
		res, err := do(t, c, request(Completions), nil)
		if errors.Is(err, ErrConnect) || res.Failure == nil || res.Failure.Reason != ReasonStreamCut ||
			!strings.Contains(res.Failure.Detail, "the server closed the connection without answering") {
			t.Errorf("reset %v: POST: %v; want a stream cut saying the server closed the connection", reset, err)
		} else if !refusal(res.Failure) {
			t.Errorf("reset %v: the dropped request is not a refusal: the client would not back off", reset)
		}
		_, err = c.ModelCards(context.Background())
		var f *Failure
		if !errors.As(err, &f) || f.Reason != ReasonStreamCut {
			t.Errorf("reset %v: GET /models: %v; want a stream cut", reset, err)
		}
		srv.Close()
	}
}

// TestScrapeDropped: a /metrics server that takes the request and closes the connection without
// an answer fails a scrape as a stream cut (unanswered), not a connect failure; a scrape whose
// caller's context has ended fails as cancelled (errors.Is context.Canceled), not as the server's
// doing; a server that is not there stays a connect failure.
func TestScrapeDropped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	sc, err := NewScraper(ScraperConfig{URL: srv.URL + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	_, err = sc.Scrape(context.Background())
	var f *Failure
	if !errors.As(err, &f) || f.Reason != ReasonStreamCut || !f.Unanswered || errors.Is(err, ErrConnect) {
		t.Errorf("dropped: %v; want an unanswered stream cut", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sc.Scrape(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v; want context.Canceled", err)
	}
	addr := srv.Listener.Addr().String()
	srv.Close()
	gone, err := NewScraper(ScraperConfig{URL: "http://" + addr + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	if _, err := gone.Scrape(context.Background()); !errors.Is(err, ErrConnect) {
		t.Errorf("no server: %v; want a connect failure", err)
	}
}

// TestNotHTTPAnswer: a connection that answers with bytes that are not HTTP (a TLS alert, as an
// https port answers a plain-http request) is not a dropped request ("closed without answering"):
// it stays a connect failure, for a request and a scrape alike.
func TestNotHTTPAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Read(make([]byte, 4096))                   // the request
			conn.Write([]byte("\x15\x03\x01\x00\x02\x02F")) // a TLS alert record
			conn.Close()
		}
	}()
	url := "http://" + ln.Addr().String()
	c := newTestClient(t, url, Config{})
	res, _ := do(t, c, request(Completions), nil)
	if f := res.Failure; f == nil || f.Reason != ReasonConnect || f.Unanswered || strings.Contains(f.Detail, "without answering") {
		t.Errorf("POST: %+v; want a connect failure, not an unanswered one", f)
	}
	sc, err := NewScraper(ScraperConfig{URL: url + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	_, err = sc.Scrape(context.Background())
	var f *Failure
	if !errors.As(err, &f) || f.Reason != ReasonConnect || f.Unanswered || strings.Contains(f.Detail, "without answering") {
		t.Errorf("scrape: %v; want a connect failure, not an unanswered one", err)
	}
}
