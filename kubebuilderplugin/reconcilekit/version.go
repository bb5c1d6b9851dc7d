package main

// Version is the reconcilekit release this plugin scaffolds against: go.mod
// requires it. It moves with the library's releases (CHANGELOG.md).
var Version = "v0.1.0"

// Replace, when set (at build time: -ldflags "-X main.Replace=DIR"), is a
// local checkout of reconcilekit that go.mod is pointed at with a replace
// directive: how the plugin is tried before a release is published.
var Replace = ""
