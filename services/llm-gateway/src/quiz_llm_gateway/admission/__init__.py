"""Admission of a call's attempts: the per-person rate, the day's cap, this replica's slices of
it, the holds (`admissions.Admissions`, `leases.CapSlices`, `writers`). Below the call, above
the rows and the settlement (a refusal's ledger row is written through the `Ledger`)."""
