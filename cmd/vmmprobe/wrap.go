package main

import "strings"

// tableWidth is the column the table outputs wrap at, as terminals and kubectl's
// describe output are read.
const tableWidth = 100

// wrapTable wraps each line longer than width at spaces. A continuation starts under the
// line's value: after its last run of two or more spaces in the first half of the width
// (the key column of a table, the status column of a check), or two columns in from the
// line's indentation. A word longer than the room left (a path, a URL) stays whole.
func wrapTable(s string, width int) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		body := strings.TrimSuffix(line, "\n")
		if len(body) <= width {
			b.WriteString(line)
			continue
		}
		col := valueColumn(body, width/2)
		b.WriteString(fill(body[:col], strings.Fields(body[col:]), width, strings.Repeat(" ", col)))
		if strings.HasSuffix(line, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// wrapWords wraps the words of s at width for text that starts at column n, continuation
// lines indented to n.
func wrapWords(s string, width, n int) string {
	pad := strings.Repeat(" ", n)
	return strings.TrimPrefix(fill(pad, strings.Fields(s), width, pad), pad)
}

// fill appends words to the line cur, separated by spaces, starting a new line, indented by
// pad, before a word that would end past width (unless it is the line's first).
func fill(cur string, words []string, width int, pad string) string {
	var b strings.Builder
	n := 0 // words on the current line
	for _, w := range words {
		if n > 0 && len(cur)+1+len(w) > width {
			b.WriteString(strings.TrimRight(cur, " ") + "\n")
			cur, n = pad, 0
		}
		if n > 0 {
			cur += " "
		}
		cur += w
		n++
	}
	return b.String() + cur
}

// valueColumn is where the value of a table line starts: after its last run of two or more
// spaces before limit, else two columns in from its indentation.
func valueColumn(line string, limit int) int {
	indent := len(line) - len(strings.TrimLeft(line, " "))
	col := indent + 2
	for i := indent; i+1 < len(line) && i < limit; i++ {
		if line[i] == ' ' && line[i+1] == ' ' {
			j := i
			for j < len(line) && line[j] == ' ' {
				j++
			}
			if j < limit {
				col = j
			}
			i = j
		}
	}
	return min(col, len(line))
}
