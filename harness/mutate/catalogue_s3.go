package mutate

func init() { Catalogue = append(Catalogue, s3Mutants...) }

// s3Mutants break what keeps an output key on S3 write-once. qualify kills
// them because it runs the store-dependent scenarios a second time with
// artifacts in a bucket of a real versitygw (--s3-scenarios, on by
// default when versitygw is found).
var s3Mutants = []Mutant{
	{ID: "s3-output-grant-not-create-only", Kind: "s3-write-once", File: "server/artifact/s3.go",
		Old:  "return s.PresignCreate(ctx, key, ttl)",
		New:  "return s.Presign(ctx, true, key, ttl)",
		What: "output put grants on S3 are plain PUTs: a late PUT without If-None-Match lands on the claimed key (killed by late_upload_after_commit@s3)", Rules: []string{"s3.create-only"}},
}
