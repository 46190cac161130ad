// Package testredis starts real redis-server processes for tests: no mocks of Redis.
//
// Start runs the Debian package's /usr/bin/redis-server (or the first redis-server on
// PATH) on a free 127.0.0.1 port with persistence off (--save "" --appendonly no), in a
// temporary directory, and stops it when the test ends. Stop, Restart, Pause and Resume
// let a test take Redis away (a crash, or a hung server that accepts connections but never
// answers) and bring it back on the same port.
//
// Every wait is a poll with a deadline: Start returns once the server answers PING, and
// Poll retries a condition until it holds or the deadline passes.
//
// When redis-server is not installed, Start fails the test and says to run
// scripts/ensure-redis.sh (make test does): a test that needs Redis never skips.
package testredis
