package controller

// NewDatabaseCache exposes the database Service cache to the tests.
var NewDatabaseCache = newDatabaseCache

// IsShard exposes isShard to the tests.
var IsShard = isShard
