// Package docs is the reconcilekit pattern guide: Markdown pages in this
// directory and in guide/, and, under quickstart/ and getting-started/, the
// code of the quickstart and of the guide as compiled, tested operators.
//
// The package holds no code of its own. Its test keeps the guide honest:
// every ```go block in a page names the file it comes from on its first line
// (// file: path) and must appear verbatim in that file, the quickstart and
// the guide must show every line of the files a reader writes, and every
// relative link must resolve. So `go test ./...` fails when a snippet drifts
// from the code or the code stops compiling.
package docs
