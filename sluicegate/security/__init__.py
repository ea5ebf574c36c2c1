"""Who is calling and what they may do: identities, the cluster PKI, authorization, audit.

``identity`` is the contract the gRPC services rely on: every call is
authenticated to one :class:`~sluicegate.security.identity.Principal`
before anything else happens.
"""
