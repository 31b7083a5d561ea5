from staticsched.cli import entry

entry()
