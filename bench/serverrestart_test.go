package bench

import (
	"slices"
	"testing"
	"time"
)

// TestNoteRestarts: each restart a Server reports and the events do not yet tell becomes one
// event and one chart marker, at the scrape that showed it, naming the server as the servers
// table does; several since the last view are told as one, with their count; a count that fell
// (another Server's, from zero) tells nothing until it grows again; and the view's last restart
// of each server is its newest marker's time.
func TestNoteRestarts(t *testing.T) {
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	s := &Session{live: newLiveState(time.Second), info: ServerInfo{Remote: &RemoteInfo{Endpoint: "http://a:8000/v1", Watch: true,
		Fleet: []string{"http://a:8000/v1", "http://b:8000/v1", "https://b:8000/v1"}}}}
	steps := []struct {
		rs     []ServerRestarts
		events []LogEvent // the new ones
	}{
		{[]ServerRestarts{{}, {}, {}}, nil},
		{[]ServerRestarts{{}, {Count: 1, After: sec(61), At: sec(62), How: "a new process start time"}, {}},
			[]LogEvent{{At: sec(62), Kind: LogRestart, Text: "b:8000 restarted between the scrapes at 1:01 and 1:02: a new process start time"}}},
		{[]ServerRestarts{{}, {Count: 1, After: sec(61), At: sec(62), How: "a new process start time"}, {}}, nil},
		{[]ServerRestarts{{Count: 3, After: sec(3599), At: sec(3605), How: "its counts went down"}, {Count: 1, After: sec(61), At: sec(62)}, {}},
			[]LogEvent{{At: sec(3605), Kind: LogRestart, Text: "a:8000 restarted 3 times, the last between the scrapes at 59:59 and 1:00:05: its counts went down"}}},
		{[]ServerRestarts{{}, {}, {}}, nil},
		{[]ServerRestarts{{}, {}, {Count: 1, After: sec(3700), At: sec(3701), How: "a new process start time"}},
			[]LogEvent{{At: sec(3701), Kind: LogRestart, Text: "https://b:8000 restarted between the scrapes at 1:01:40 and 1:01:41: a new process start time"}}},
	}
	var want []LogEvent
	for i, st := range steps {
		s.noteRestarts(st.rs)
		want = append(want, st.events...)
		if got := s.live.events.slice(); !slices.Equal(got, want) {
			t.Fatalf("step %d: events %+v, want %+v", i, got, want)
		}
	}
	wantMarks := []Marker{{sec(62), "restart b:8000"}, {sec(3605), "restart a:8000"}, {sec(3701), "restart https://b:8000"}}
	if got := s.live.markers.slice(); !slices.Equal(got, wantMarks) {
		t.Errorf("markers %+v, want %+v", got, wantMarks)
	}
	v := &View{Header: Header{Remote: s.info.Remote}, Markers: s.live.markers.slice()}
	if got := v.LastRestarts(); !slices.Equal(got, []time.Duration{sec(3605), sec(62), sec(3701)}) {
		t.Errorf("last restarts %v", got)
	}
	if (&View{}).LastRestarts() != nil {
		t.Error("rosetop's own engine has restarts of a remote server")
	}
	// One server (bench --endpoint, or --watch of one): named by its host and port too.
	one := &Session{live: newLiveState(time.Second), info: ServerInfo{Remote: &RemoteInfo{Endpoint: "http://10.0.0.7:8000/v1"}}}
	one.noteRestarts([]ServerRestarts{{Count: 1, After: sec(1), At: sec(2), How: "a new process start time"}})
	if got := one.live.markers.slice(); !slices.Equal(got, []Marker{{sec(2), "restart 10.0.0.7:8000"}}) {
		t.Errorf("one server's markers %+v", got)
	}
}
