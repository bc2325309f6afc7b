"""What a finding is: ablation, reduction, shrinking, signatures and the bucket book that alone
decides whether two findings are the same bug. May import the judge and everything below it."""
