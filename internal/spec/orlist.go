package spec

import "strings"

// OrList joins names as help texts and errors list the choices they
// offer: "a", "a or b", "a, b or c". It is the one way Warden words such
// a list, so every flag and error reads alike whatever the list's length;
// none is "".
func OrList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
