"""The install step: imports the package once (as a package's build would run its code)."""
import primes

print("installed primes", primes.count_primes(10))
