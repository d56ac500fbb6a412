"""The demo and the local parts it runs on (a Tansu broker, a local PostgreSQL): for trying
shareproxy and for the tests, never imported by the proxy itself."""
