package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestSlotCount(t *testing.T) {
	c := newSlotCount("paused", "max-paused")
	steps := []struct {
		owner string
		want  string // "" for taken, else a part of the refusal
	}{
		{"a", ""},
		{"a", "this key holds 1 paused sessions, its share of --max-paused"},
		{"b", ""},
		{"c", "the server holds its limit of 2 paused sessions (set by --max-paused)"},
	}
	for i, st := range steps {
		err := c.take(st.owner, 2, 1)
		switch {
		case st.want == "" && err != nil:
			t.Errorf("step %d: take(%s) = %v; want taken", i, st.owner, err)
		case st.want != "" && (!errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), st.want)):
			t.Errorf("step %d: take(%s) = %v; want ErrTooMany saying %q", i, st.owner, err, st.want)
		}
	}
	c.give("a")
	c.give("b")
	if c.n != 0 || len(c.byOwner) != 0 {
		t.Errorf("after giving all back: n %d, by owner %v; want 0 and none", c.n, c.byOwner)
	}
}
