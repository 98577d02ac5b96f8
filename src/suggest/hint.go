package suggest

// DidYouMean is the tail of a refusal that names what the person probably
// meant: ` — did you mean "status"?`, with up to max names from Closest, or
// "" when nothing is close (the refusal then stands alone).
func DidYouMean(typed string, candidates []string, max int) string {
	if c := Closest(typed, candidates, max); c != nil {
		return " — did you mean " + Phrase(c) + "?"
	}
	return ""
}
