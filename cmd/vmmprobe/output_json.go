package main

import (
	"bytes"
	"encoding/json"
)

// renderJSON is the document as indented JSON: the schema of docs/vmmprobe.md, version
// schemaVersion. Shell commands in remedies keep their & < > unescaped.
func renderJSON(doc *document) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
