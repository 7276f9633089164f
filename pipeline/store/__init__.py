"""The artifact store: versioned, hash-linked artifacts under a root, local or on an object store.

:mod:`.artifacts` builds and publishes (the :class:`~.artifacts.Store`), :mod:`.catalog` finds and
reads what is published, :mod:`.manifest` hashes and verifies an artifact's files (:mod:`.inputs`:
its raw-input records, in the manifest or past 10,000 in a file of their own), :mod:`.layout`
says what each kind must hold, :mod:`.workspace` keeps the private areas (locks, builds, runs);
:mod:`.remote`, :mod:`.lease` and :mod:`.remote_runs` are the same store on ``s3://`` / ``gs://``.
:mod:`.factory` opens a root as either (the one module that knows both).
"""
