from tests.s3emu import s3_server  # noqa: F401 - the S3 emulator fixture (moto's server mode)
