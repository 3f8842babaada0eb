// Package docscheck keeps the repository's Markdown true to itself: every
// relative link in a *.md file must name a file that exists and, with a
// #fragment, a heading in it, and every docs/*.md that code or
// configuration cites must exist. The docs are split into topic files that
// other changes edit and move, and a link that silently breaks sends a
// reader nowhere.
package docscheck
