package controller

// IsShard exposes isShard to the tests.
var IsShard = isShard
