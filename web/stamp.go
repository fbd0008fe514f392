package web

// A region of the session page (run bar, queue, cards, budget, shelf) is
// redrawn by two doors: the answer to the request that changed it, and the
// event stream. Under load the answer to a POST can land after the
// stream's redraw of a later state (a send's answer said "Starting…" after
// the stream had shown the turn's end, and nothing redrew it again). Every
// region therefore carries the event seq it was rendered at, a lower bound
// of the state it shows (read before the state), and the page never
// replaces a region with one rendered at an older seq. Whatever changed
// after that seq has an event of its own, which redraws the region again.

// stamp marks the regions among parts as rendered at seq at.
func stamp(parts []part, at int64) []part {
	for _, p := range parts {
		switch v := p.data.(type) {
		case *runState:
			v.At = at
		case *queueView:
			v.At = at
		case *cards:
			v.At = at
		case *budget:
			v.At = at
		case *shelf:
			v.At = at
		}
	}
	return parts
}
