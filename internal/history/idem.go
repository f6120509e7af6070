package history

// An idempotency key's history: the attempts begun on it (their windows
// are Holds, checked by Exclusion), the completions the service
// answered, and the stored results Begin answered.

// IdemComplete is one Complete; Unknown if its answer was lost.
type IdemComplete struct {
	Op      int64
	Key     string
	Token   uint64 // the attempt's
	Result  string
	Unknown bool
}

// IdemAnswer is a Begin that answered the key's stored result.
type IdemAnswer struct {
	Op     int64
	Key    string
	Result string
}

// IdemOnce checks one completion per key: at most one Complete answered
// OK per key, and every stored result Begin answered is the result of a
// Complete of that key (the one answered OK, if any).
func IdemOnce(completes []IdemComplete, answers []IdemAnswer) []Violation {
	var out []Violation
	done := map[string]IdemComplete{}
	sent := map[string]map[string]bool{} // key -> results sent in a Complete
	for _, c := range completes {
		if sent[c.Key] == nil {
			sent[c.Key] = map[string]bool{}
		}
		sent[c.Key][c.Result] = true
		if c.Unknown {
			continue
		}
		if o, twice := done[c.Key]; twice {
			out = append(out, violation(CheckCompletedTwice, ops(o.Op, c.Op),
				"%s completed twice: by token %d (%q) and by token %d (%q)", c.Key, o.Token, o.Result, c.Token, c.Result))
			continue
		}
		done[c.Key] = c
	}
	for _, a := range answers {
		if c, ok := done[a.Key]; ok && c.Result != a.Result {
			out = append(out, violation(CheckCompletedTwice, ops(c.Op, a.Op),
				"%s answered result %q, but the completion answered OK stored %q", a.Key, a.Result, c.Result))
		} else if !sent[a.Key][a.Result] {
			out = append(out, violation(CheckCompletedTwice, ops(a.Op),
				"%s answered result %q, which no Complete of the key sent", a.Key, a.Result))
		}
	}
	return out
}
