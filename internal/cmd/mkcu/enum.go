package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Reading C enums from the header: their enumerators, values, doc comments and which
// name of a shared value is the primary.

// enumerator is one constant of a C enum.
type enumerator struct {
	name       string // C name
	valueText  string // as written after '=', empty when implicit
	value      int64
	doc        string // doxygen comment text, markers and leading '*' removed, whitespace collapsed
	deprecated bool
	primary    string // C name of the primary enumerator with the same value; itself when primary
}

func (e *enumerator) isPrimary() bool { return e.primary == e.name }

// parseEnum returns the enumerators of `typedef enum tag { ... } typedefName;`, in header
// order, with values resolved and primaries chosen.
func parseEnum(src []byte, tag, typedefName string) ([]*enumerator, error) {
	start := regexp.MustCompile(`typedef\s+enum\s+` + regexp.QuoteMeta(tag) + `\s*\{`).FindIndex(src)
	if start == nil {
		return nil, fmt.Errorf("enum %s not found", tag)
	}
	endRE := regexp.MustCompile(`\}\s*` + regexp.QuoteMeta(typedefName) + `\s*;`)
	end := endRE.FindIndex(src[start[1]:])
	if end == nil {
		return nil, fmt.Errorf("end of enum %s (} %s;) not found", tag, typedefName)
	}
	body := string(src[start[1] : start[1]+end[0]])
	entries, err := lexEnum(body)
	if err != nil {
		return nil, fmt.Errorf("enum %s: %w", tag, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("enum %s is empty", tag)
	}
	if err := resolve(entries); err != nil {
		return nil, fmt.Errorf("enum %s: %w", tag, err)
	}
	return entries, nil
}

// enumTokenRE matches the token that starts an enum body: blanks, a comment, "=" and the
// value after it (up to a "," or a comment), a name, or any other character.
var enumTokenRE = regexp.MustCompile(`(?s)^(?:\s+|/\*.*?\*/|//[^\n]*|=(?:[^,/]|/[^*/,])*|[A-Za-z_]\w*|.)`)

// lexEnum splits an enum body into enumerators and attaches doxygen comments: a "/**"
// comment documents the next enumerator, a "/**<" comment the one before it.
func lexEnum(body string) ([]*enumerator, error) {
	var (
		entries    []*enumerator
		cur        *enumerator
		pendingDoc string
	)
	for rest := body; rest != ""; {
		tok := enumTokenRE.FindString(rest)
		switch {
		case strings.TrimSpace(tok) == "":
		case strings.HasPrefix(rest, "/*") && !strings.HasSuffix(tok, "*/"):
			return nil, errors.New("unterminated comment")
		case strings.HasPrefix(tok, "/*"), strings.HasPrefix(tok, "//"):
			text := tok[2:]
			if tok[1] == '*' {
				text = strings.TrimSuffix(text, "*/")
			}
			// A doc comment starts with its opener's second character again ("/**", "///")
			// or with '!'.
			doc := tok[1:2]
			switch {
			case strings.HasPrefix(text, doc+"<"), strings.HasPrefix(text, "!<"):
				// The enumerator before it, whether or not its "," came first.
				e := cur
				if e == nil && len(entries) > 0 {
					e = entries[len(entries)-1]
				}
				if e != nil {
					e.doc = joinDoc(e.doc, cleanComment(text[2:]))
				}
			case strings.HasPrefix(text, doc), strings.HasPrefix(text, "!"):
				pendingDoc = joinDoc(pendingDoc, cleanComment(text[1:]))
			}
		case tok == "#":
			// Conditional enumerators would need a preprocessor to get right; refuse rather
			// than guess.
			return nil, fmt.Errorf("preprocessor directive inside enum: %q", firstLine(rest))
		case tok == ",":
			if cur == nil {
				return nil, errors.New("stray ','")
			}
			entries = append(entries, cur)
			cur = nil
		case tok[0] == '=':
			if cur == nil || cur.valueText != "" {
				return nil, fmt.Errorf("unexpected '=' near %q", firstLine(rest))
			}
			if cur.valueText = strings.TrimSpace(tok[1:]); cur.valueText == "" {
				return nil, fmt.Errorf("%s: empty value", cur.name)
			}
		case identOnlyRE.MatchString(tok) && cur == nil:
			cur = &enumerator{name: tok, doc: pendingDoc}
			pendingDoc = ""
		default:
			return nil, fmt.Errorf("cannot parse enum body near %q", firstLine(rest))
		}
		rest = rest[len(tok):]
	}
	if cur != nil {
		entries = append(entries, cur)
	}
	return entries, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// joinDoc joins two pieces of doc text, each trimmed and either empty, with a space.
func joinDoc(a, b string) string { return strings.TrimSpace(a + " " + b) }

// cleanComment removes the leading '*' of each comment line and collapses whitespace.
func cleanComment(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		l = strings.TrimLeft(l, "*")
		if i == len(lines)-1 {
			// A comment closed with "**/" (CUpointer_attribute's) leaves a '*' at its end.
			l = strings.TrimRight(l, "*")
		}
		lines[i] = l
	}
	return strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
}

// resolve computes values (implicit ones follow C: the previous value plus one), marks
// deprecated enumerators and picks the primary name of every value.
func resolve(entries []*enumerator) error {
	byName := make(map[string]*enumerator, len(entries))
	var next int64
	for _, e := range entries {
		if _, dup := byName[e.name]; dup {
			return fmt.Errorf("%s defined twice", e.name)
		}
		switch t := e.valueText; {
		case t == "":
			e.value = next
		case byName[t] != nil:
			e.value = byName[t].value
		default:
			v, err := parseInt(t)
			if err != nil {
				return fmt.Errorf("%s: value %q: %w", e.name, t, err)
			}
			e.value = v
		}
		if e.value < -1<<31 || e.value > 1<<31-1 {
			return fmt.Errorf("%s: value %d does not fit in int32", e.name, e.value)
		}
		next = e.value + 1
		e.deprecated = deprecatedRE.MatchString(e.doc)
		byName[e.name] = e
	}
	primary := make(map[int64]*enumerator)
	for _, e := range entries {
		if p := primary[e.value]; p == nil || (p.deprecated && !e.deprecated) {
			primary[e.value] = e
		}
	}
	for _, e := range entries {
		e.primary = primary[e.value].name
	}
	return nil
}

// parseInt parses a C integer literal, with an optional sign and U/L suffixes.
func parseInt(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")") {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	s = strings.TrimRight(s, "uUlL")
	return strconv.ParseInt(s, 0, 64)
}
