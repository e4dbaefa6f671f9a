package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"unicode"
)

// The doc comments of generated constants: the header's doxygen turned into one-line
// descriptions and "Deprecated:" notes.

// deprecatedRE matches what marks an enumerator deprecated in its doc comment: a doxygen
// \deprecated command, or (the CUdevice_attribute convention) a sentence that starts with
// "Deprecated".
var deprecatedRE = regexp.MustCompile(`(?i)[\\@]deprecated\b|(^|[.!]\s+)Deprecated\b`)

var (
	deprecatedCmdRE = regexp.MustCompile(`(?i)[\\@]deprecated\b\s*`)
	doxygenCmdRE    = regexp.MustCompile(`[\\@](ref|p|c|e|a|b|em|note|brief|sa|see)\b\s*`)
	resultLeadInRE  = regexp.MustCompile(`(?i)^(this\s+(error\s+)?)?(indicates|indicated|indiciates)\s+(that\s+)?`)
	deprecatedLead  = regexp.MustCompile(`(?i)^deprecated\b[\s,.;:]*`)
	// crossRefRE matches doxygen's "::name" link marker, but not C++ scope ("Type::field").
	crossRefRE = regexp.MustCompile(`(^|[\s(\[])::`)
)

// plainText removes doxygen markup so that the text reads as prose.
func plainText(doc string) string {
	doc = deprecatedCmdRE.ReplaceAllString(doc, "")
	doc = doxygenCmdRE.ReplaceAllString(doc, "")
	doc = crossRefRE.ReplaceAllString(doc, "$1")
	return strings.Join(strings.Fields(doc), " ")
}

// sentences splits prose into sentences, without their final period. A period ends a
// sentence only when followed by a space (or the end) and not part of "e.g." or "i.e.".
func sentences(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '.' && c != '!' && c != '?' {
			continue
		}
		if i+1 < len(text) && text[i+1] != ' ' {
			continue
		}
		lower := strings.ToLower(text[start : i+1])
		if c == '.' && (strings.HasSuffix(lower, "e.g.") || strings.HasSuffix(lower, "i.e.") ||
			strings.HasSuffix(lower, " etc.") || strings.HasSuffix(lower, " vs.")) {
			continue
		}
		if s := strings.TrimSpace(text[start:i]); s != "" {
			out = append(out, s)
		}
		start = i + 1
	}
	if s := strings.TrimSpace(strings.TrimRight(text[start:], ".")); s != "" {
		out = append(out, s)
	}
	return out
}

// shorten cuts s to at most n bytes at a word boundary, marking the cut with "...".
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := strings.LastIndexByte(s[:n-3], ' ')
	if cut <= 0 {
		cut = n - 3
	}
	return strings.TrimRight(s[:cut], " ,;:") + "..."
}

// capitalize upper-cases the first letter of s when its first word is a plain lower-case
// word, leaving identifiers such as "cuMemCreate" alone.
func capitalize(s string) string {
	word, _, _ := strings.Cut(s, " ")
	if word == "" || strings.IndexFunc(word, func(r rune) bool { return !unicode.IsLower(r) && r != '-' && r != '\'' && r != ',' }) >= 0 {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// description returns the one-line description of e: the first sentence of its doc comment.
func description(e *enumerator, dropLeadIn bool) string {
	ss := sentences(plainText(e.doc))
	if len(ss) == 0 {
		fmt.Fprintf(os.Stderr, "mkcu: warning: %s has no doc comment\n", e.name)
		return capitalize(strings.ToLower(strings.ReplaceAll(e.name, "_", " ")))
	}
	d := ss[0]
	if dropLeadIn {
		d = resultLeadInRE.ReplaceAllString(d, "")
	}
	return shorten(capitalize(d), maxDescription)
}

// deprecationNote returns the text of the "Deprecated:" paragraph for e, or "" when e is not
// deprecated.
func deprecationNote(e *enumerator, desc string, goName func(string) string) string {
	if !e.isPrimary() {
		return "Use [" + goName(e.primary) + "] instead."
	}
	if !e.deprecated {
		return ""
	}
	// Take what the header says after its deprecation marker, minus the sentence that
	// already is the description.
	doc := e.doc
	if loc := deprecatedRE.FindStringIndex(doc); loc != nil {
		doc = strings.TrimLeft(doc[loc[0]:], ".! ")
	}
	doc = deprecatedLead.ReplaceAllString(plainText(doc), "")
	note := ""
	for _, s := range sentences(doc) {
		s = capitalize(s)
		if note == "" && strings.EqualFold(s, desc) {
			continue
		}
		if note != "" && len(note)+1+len(s)+1 > maxNote {
			break
		}
		note = joinDoc(note, s+".")
	}
	if note == "" {
		return "Do not use."
	}
	return shorten(note, maxNote)
}
